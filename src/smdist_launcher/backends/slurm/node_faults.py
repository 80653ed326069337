"""Fault rehearsal on Slurm (`smdist run --backend slurm --inject FAULT@SECONDS`): every node fires the faults aimed
at it, on itself, since only a node can reach its own processes on a real cluster.

SECONDS count from the first rank's start of the first attempt, as on the local backends: the first node to see a
rank line writes that time into the job folder (every node reads the same one). Each fault fires once (a marker per
fault and host); one whose time falls between attempts fires as soon as the next attempt's ranks are up."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ...container.process_tree import descendants
from ..toolkit.faults import Fault, parse_fault, signal_rank
from ..toolkit.jobdir import JobDir

FAULTS_FILE = "slurm/faults.json"
_FIRST_RANK_AT = "slurm/first-rank-at"
_FIRED = "slurm/faults-fired"


def fired_markers(job: JobDir) -> set[str]:
    """The faults fired so far (`<index>-<host>`)."""
    folder = job.root / _FIRED
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def save_faults(job: JobDir, faults: list[str]) -> None:
    if faults:
        (job.root / FAULTS_FILE).write_text(json.dumps(faults))


def _aimed_at(fault: Fault, host: str, rank_hosts: dict[int, str]) -> bool:
    if fault.kind == "preempt":
        return True
    if fault.kind == "kill-host":
        return fault.target == host
    return fault.target is not None and rank_hosts.get(int(fault.target)) == host


class NodeFaults:
    """The faults of one node: armed when its first rank line comes, fired on its own runtime's process tree. A rank
    fault signals only the process carrying this job's and attempt's marker (SMDIST_JOB_ID, SMDIST_ATTEMPT) and that
    rank, never a pid read from a file that an unrelated process may have reused since."""

    def __init__(self, job: JobDir, host: str, rank_hosts: dict[int, str], job_id: str, attempt: int,
                 say: Callable[[str], None]) -> None:
        self.job, self.host, self.say = job, host, say
        self.job_id, self.attempt = job_id, attempt
        path = job.root / FAULTS_FILE
        raw = json.loads(path.read_text()) if path.is_file() else []
        self.faults = [(i, f) for i, f in enumerate(map(parse_fault, raw)) if _aimed_at(f, host, rank_hosts)]
        self.proc: subprocess.Popen[bytes] | None = None
        self._timers: list[threading.Timer] = []
        self._armed = False

    def rank_up(self, proc: subprocess.Popen[bytes]) -> None:
        """A rank of this node printed its first line: the clock exists now (ours or an earlier node's)."""
        if self._armed or not self.faults:
            return
        self._armed, self.proc = True, proc
        t0 = self._first_rank_at()
        for index, fault in self.faults:
            marker = self.job.root / _FIRED / f"{index}-{self.host}"
            if marker.exists():
                continue
            timer = threading.Timer(max(0.0, t0 + fault.at_s - time.time()), self._fire, args=(fault, marker))
            timer.daemon = True
            timer.start()
            self._timers.append(timer)

    def cancel(self) -> None:
        for timer in self._timers:
            timer.cancel()

    def _first_rank_at(self) -> float:
        path = self.job.root / _FIRST_RANK_AT
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            for _ in range(50):  # another node is writing it this instant
                text = path.read_text().strip()
                if text:
                    return float(text)
                time.sleep(0.1)
            return time.time()
        with os.fdopen(fd, "w") as f:
            f.write(repr(time.time()))
        return float(path.read_text())

    def _fire(self, fault: Fault, marker: Path) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return  # this attempt is over: the next one fires it
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return
        self.say(f"injecting {fault}")
        try:
            if fault.kind == "kill-host":  # the host's runtime and everything under it, at once
                os.kill(proc.pid, signal.SIGSTOP)
                for pid in [proc.pid, *descendants(proc.pid)]:
                    os.kill(pid, signal.SIGKILL)
            elif fault.kind == "preempt":
                proc.send_signal(signal.SIGTERM)
            elif fault.target is not None:
                signum = signal.SIGKILL if fault.kind == "kill-rank" else signal.SIGSTOP
                if signal_rank(self.job_id, self.attempt, int(fault.target), signum) is None:
                    self.say(f"{fault}: rank {fault.target} is not running; nothing injected")
        except ProcessLookupError:
            pass
