"""job.json: what happened to a local job (status, phase timings, failure), written atomically
at every phase change so `smdist jobs` and `smdist logs` can read it while the job runs."""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..api import TERMINAL_STATES, JobState

# The states as job.json stores them (backends.api.JobState's values: one definition of "ended" for every backend).
IN_PROGRESS = JobState.IN_PROGRESS.value
COMPLETED = JobState.COMPLETED.value
FAILED = JobState.FAILED.value
STOPPED = JobState.STOPPED.value
MAX_RUNTIME_EXCEEDED = JobState.MAX_RUNTIME_EXCEEDED.value
INTERRUPTED = JobState.INTERRUPTED.value
FINAL_STATUSES = tuple(sorted(s.value for s in TERMINAL_STATES))


@dataclass
class JobRecord:
    job_name: str
    job_id: str
    job_dir: str
    status: str = IN_PROGRESS
    phase: str = "created"
    created: float = field(default_factory=time.time)
    ended: float | None = None
    # phase name -> [start, end] wall-clock seconds (end None while the phase runs)
    phases: dict[str, list[float | None]] = field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what local mode changed to run the plan here (the master port)
    local: dict[str, Any] = field(default_factory=dict)
    failure_reason: str | None = None
    model_data: str | None = None
    output_data: str | None = None
    launcher_pid: int = field(default_factory=os.getpid)
    # when that process started (clock ticks since boot, /proc/<pid>/stat): a reused pid is not the launcher
    launcher_started: int | None = field(default_factory=lambda: process_start(os.getpid()))
    plan: dict[str, Any] = field(default_factory=dict)
    # Which backend ran the job (a backends.registry name; "local" in older records is "process") and what that
    # backend needs to find the job again (a Slurm job id, container names): status/stop/logs dispatch on these.
    backend: str = "process"
    backend_info: dict[str, Any] = field(default_factory=dict)
    # every attempt: its number, cause, reason, what the restart policy decided, where it resumed (first steps)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def enter_phase(self, name: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if self.phase in self.phases and self.phases[self.phase][1] is None:
            self.phases[self.phase][1] = now
        self.phase = name
        self.phases[name] = [now, None]

    def finish(self, status: str, failure_reason: str | None = None, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.enter_phase("done", now)
        self.phases["done"][1] = now
        self.status = status
        self.failure_reason = failure_reason
        self.ended = now

    def launcher_gone(self) -> bool:
        """Still InProgress, but the process that ran it is gone (killed, crashed): no final status will come."""
        if self.status != IN_PROGRESS or not self.launcher_pid:
            return False  # ended, or a job that runs without a launcher here (Slurm, SageMaker: launcher_pid 0)
        try:
            os.kill(self.launcher_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, someone else's: is it still the launcher?
        started = process_start(self.launcher_pid)
        return self.launcher_started is not None and started is not None and started != self.launcher_started

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.created

    def save(self, path: Path) -> None:
        # a name per writer: two writers (a job's threads, Slurm's attempt loop and a refreshing launcher) must not
        # replace each other's half-written file
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> JobRecord:
        data = json.loads(path.read_text())
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def process_start(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux), None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19])  # field 22; the name in (...) may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def list_records(root: Path) -> list[JobRecord]:
    """Every readable job record under a jobs root, oldest first."""
    records = []
    if root.is_dir():
        for path in root.glob("*/job.json"):
            try:
                records.append(JobRecord.load(path))
            except (OSError, ValueError, TypeError):
                continue  # a record being written or from another version: not worth failing a listing
    return sorted(records, key=lambda r: r.created)
