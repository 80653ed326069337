"""Find and kill every process of a job by the SMDIST_JOB_ID marker in its environment.

Process groups are not enough: orted and the MPI ranks it starts come from another host's
runtime (through our rsh agent) and some tools start their own sessions. The marker is
inherited by all of them, and /proc/<pid>/environ shows it."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

JOB_ID_ENV = "SMDIST_JOB_ID"


def job_processes(job_id: str, proc: Path = Path("/proc")) -> list[int]:
    needle = f"\0{JOB_ID_ENV}={job_id}\0".encode()
    me = os.getpid()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, a zombie, or not ours
            continue
        if needle in b"\0" + environ + b"\0":
            found.append(int(entry.name))
    return found


def kill_job_processes(job_id: str, attempts: int = 20, pause: float = 0.05) -> list[int]:
    """SIGKILL every process carrying the marker until none is left; returns the pids killed."""
    return kill_until_gone(lambda: job_processes(job_id), attempts, pause)


def kill_until_gone(find: Callable[[], list[int]], attempts: int = 20, pause: float = 0.05) -> list[int]:
    """SIGKILL whatever `find()` returns until it returns nothing (or `attempts` runs out); returns the pids killed."""
    killed: list[int] = []
    for _ in range(attempts):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(pause)  # let the kernel reap them before looking again
    return killed
