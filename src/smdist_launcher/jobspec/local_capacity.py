"""How many processes a local-mode job can start on this machine (every simulated host runs here).

Cores may be oversubscribed (CPU ranks mostly wait on each other), memory and process slots may not: a rank is at
least a Python interpreter. The limits are generous on purpose: they stop a typo (2**31 hosts), not a tight fit."""
from __future__ import annotations

import os
import resource
from dataclasses import dataclass

MIB = 1024 * 1024
MEMORY_PER_PROCESS = 64 * MIB      # a bare Python interpreter with the runtime loaded; torch needs more
PROCESSES_PER_CORE = 32            # CPU ranks oversubscribe cores well beyond one each


@dataclass(frozen=True)
class Capacity:
    processes: int   # the most processes a local job may start here
    why: str         # which resource decides it, in words


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _process_slots() -> int | None:
    """RLIMIT_NPROC (per user) or the kernel's pid_max, whichever is lower; None when unbounded/unknown."""
    limits = []
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY:
            limits.append(int(soft))
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open("/proc/sys/kernel/pid_max") as fh:
            limits.append(int(fh.read().strip()))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def capacity() -> Capacity:
    cores = os.cpu_count() or 1
    options = [(cores * PROCESSES_PER_CORE, f"{cores} CPU cores × {PROCESSES_PER_CORE}")]
    memory = _memory_bytes()
    if memory:
        options.append((memory // MEMORY_PER_PROCESS,
                        f"{memory / (1024 * MIB):.1f} GiB of memory at {MEMORY_PER_PROCESS // MIB} MiB per process"))
    slots = _process_slots()
    if slots:
        options.append((slots // 2, f"{slots} process slots (ulimit -u / pid_max), half of them for the job"))
    processes, why = min(options)
    return Capacity(max(processes, 1), why)
