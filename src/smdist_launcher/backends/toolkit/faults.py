"""Fault rehearsal: `--inject FAULT@SECONDS`, parsed and checked once; the job's loop fires each at its time.

SECONDS count from the first rank's start (of the first attempt), so a list of faults rehearses a whole run:
kill-host:algo-2@60 kill-host:algo-1@120. A fault whose time falls between attempts fires once the next one runs.

A rank fault finds its process by the marker every process of the attempt carries in its environment (the job id and
the attempt number the launcher sets on each host, the rank its launcher gives it), never by a pid file: a pid of an
earlier attempt may belong to an unrelated process by now."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..fault_spec import EXAMPLES, Fault, FaultKind, check_targets, parse_fault
from .process_sweep import JOB_ID_ENV
from .resilience_plan import ATTEMPT_ENV

__all__ = ["EXAMPLES", "Fault", "FaultKind", "KilledHost", "check_targets", "parse_fault", "rank_pid",
           "rank_processes", "signal_rank"]

# Where a rank's launcher puts its rank (torchrun, mpirun, the runtime for a lone script): the order compat's
# sitecustomize reads them in when a rank registers its stack dumps.
RANK_ENVS = ("RANK", "OMPI_COMM_WORLD_RANK", "SMDIST_RANK")


@dataclass(frozen=True)
class KilledHost:
    """A host the fault rehearsal killed in an attempt (kill-host). The diagnosis believes this record before the
    host's exit code, which depends on the placement (a process's -9, a docker client's 137 or 1), and before what
    its runtime may still write after the kill."""

    host: str
    fault: str          # the fault as given: kill-host:algo-2@60
    wall_time: float    # time.time() just before the kill


def _rank_of(environ: dict[str, str]) -> int | None:
    value = next((environ[name] for name in RANK_ENVS if environ.get(name)), None)
    return int(value) if value is not None and value.isdigit() else None


def rank_processes(job_id: str, attempt: int, rank: int) -> list[Any]:
    """The processes (psutil.Process) of this job's attempt that carry `rank`: the rank itself first, then what it
    started (data loader workers inherit its environment)."""
    import psutil  # here: the launcher needs it only when a rank fault fires

    wanted = {JOB_ID_ENV: job_id, ATTEMPT_ENV: str(attempt)}
    found: dict[int, Any] = {}
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
        except (psutil.Error, OSError):  # gone, a zombie, or not ours to read
            continue
        if all(environ.get(k) == v for k, v in wanted.items()) and _rank_of(environ) == rank:
            found[proc.pid] = proc

    def depth(proc: Any) -> int:  # how many of its ancestors are the same rank's
        try:
            return sum(1 for parent in proc.parents() if parent.pid in found)
        except psutil.Error:
            return 0

    return sorted(found.values(), key=lambda proc: (depth(proc), proc.pid))


def rank_pid(job_id: str, attempt: int, rank: int) -> int | None:
    """The pid of `rank` of this job's attempt (the one process carrying the marker whose parent does not), None
    when it is not running."""
    procs = rank_processes(job_id, attempt, rank)
    return procs[0].pid if procs else None


def signal_rank(job_id: str, attempt: int, rank: int, signum: int) -> int | None:
    """Send `signum` to `rank` of this job's attempt; the pid signalled, None when that rank is not running. psutil
    checks the process is still the one found (its start time) before it signals: a pid reused in between is left
    alone."""
    import psutil

    procs = rank_processes(job_id, attempt, rank)
    if not procs:
        return None
    try:
        procs[0].send_signal(signum)
    except psutil.NoSuchProcess:
        return None
    return int(procs[0].pid)
