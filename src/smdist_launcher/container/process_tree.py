"""Find and stop every process the runtime started, including ones that left its process group.

torchrun starts each rank in a new session and orted does the same, so a process-group kill alone misses them:
the runtime becomes a child subreaper (orphans reparent to it) and walks /proc for its descendants."""
from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


def _resolve_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()  # resolved here: no dlopen between fork and exec in a multithreaded runtime


def with_parent(sig: int) -> Callable[[], None] | None:
    """preexec_fn: `sig` when the parent dies, even by SIGKILL (None where there is no prctl).

    The parent is the THREAD that forked: when a multithreaded parent dies, Linux sends `sig` again each time the
    child is handed to another of its dying threads (or to another subreaper). A child that must hear it once gets
    a one-thread parent that passes one on (container/mpirun_parent.py)."""
    if _PRCTL is None or not hasattr(os, "fork"):
        return None
    prctl, signum = _PRCTL, int(sig)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return preexec


TERM_WITH_PARENT = with_parent(signal.SIGTERM)


def become_subreaper() -> bool:
    """Orphaned descendants reparent to us instead of init, so they stay findable. Linux only; False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name (which may contain spaces and parentheses).
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) >= 2:
            parents[int(entry)] = int(rest[1])
    return parents


def descendants(pid: int) -> list[int]:
    """All live descendants of `pid` (children first), zombies included."""
    children: dict[int, list[int]] = {}
    for child, parent in _parent_map().items():
        children.setdefault(parent, []).append(child)
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _signal_all(pids: list[int], sig: int) -> None:
    own_group = os.getpgrp()
    groups = set()
    for p in pids:
        try:
            os.kill(p, sig)
            groups.add(os.getpgid(p))
        except (ProcessLookupError, PermissionError):
            pass
    for g in groups - {own_group}:
        try:
            os.killpg(g, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> None:
    """Collect exited children (we are their subreaper) so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def is_alive(pid: int) -> bool:
    """Running, not a zombie (a killed process nobody reaped yet is gone for our purposes)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if is_alive(p)]


def terminate_descendants(grace_s: float = 5.0, pid: int | None = None) -> list[int]:
    """SIGTERM every descendant, SIGKILL what is left after `grace_s`. Returns the pids that needed SIGKILL."""
    pid = os.getpid() if pid is None else pid
    targets = descendants(pid)
    if not targets:
        return []
    _signal_all(targets, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        # New descendants may appear (a launcher restarting a worker): include them.
        targets = _alive(sorted(set(targets) | set(descendants(pid))))
        if not targets:
            return []
        time.sleep(0.05)
    _signal_all(targets, signal.SIGKILL)
    for _ in range(100):
        _reap()
        if not _alive(targets + descendants(pid)):
            break
        time.sleep(0.02)
    return targets
