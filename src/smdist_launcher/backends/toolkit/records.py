"""job.json: what happened to a local job (status, phase timings, failure), written atomically
at every phase change so `smdist jobs` and `smdist logs` can read it while the job runs."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...container.full_disk import is_full_disk
from ..phases import Phase
from ..secondary_status import phase_of_secondary
from ..states import TERMINAL_STATES, JobState

# The job states (backends.states.JobState: one definition of "ended" for every backend); job.json keeps their values.
IN_PROGRESS = JobState.IN_PROGRESS
COMPLETED = JobState.COMPLETED
FAILED = JobState.FAILED
STOPPED = JobState.STOPPED
MAX_RUNTIME_EXCEEDED = JobState.MAX_RUNTIME_EXCEEDED
INTERRUPTED = JobState.INTERRUPTED
FINAL_STATUSES = tuple(sorted(s.value for s in TERMINAL_STATES))


@dataclass
class JobRecord:
    job_name: str
    job_id: str
    job_dir: str
    # str enums: job.json keeps their plain values, and a record read back holds the members again (__post_init__)
    status: JobState = IN_PROGRESS
    phase: Phase = Phase.CREATED
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
    # SageMaker's SecondaryStatus (a sagemaker job's record): its own field, `phase` holds the Phase it maps to
    secondary_status: str | None = None

    def __post_init__(self) -> None:
        self.status = JobState.of(self.status)
        self.phase = self._phase_of(self.phase)

    def _phase_of(self, value: str | Phase) -> Phase:
        """A Phase, whatever an older record kept: a sagemaker record kept SageMaker's SecondaryStatus in `phase`
        (mapped, and kept in `secondary_status`); a value no version knows reads as where the job must be."""
        if isinstance(value, Phase) or value in Phase._value2member_map_:
            return Phase.of(value)
        mapped = phase_of_secondary(value)
        if mapped is not None:
            self.secondary_status = self.secondary_status or value
            return mapped
        return Phase.DONE if self.status.is_terminal else Phase.RUNNING

    def enter_phase(self, name: str | Phase, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if self.phase.value in self.phases and self.phases[self.phase.value][1] is None:
            self.phases[self.phase.value][1] = now
        self.phase = Phase.of(name)
        self.phases[self.phase.value] = [now, None]

    def finish(self, status: str | JobState, failure_reason: str | None = None, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.enter_phase(Phase.DONE, now)
        self.phases[Phase.DONE.value][1] = now
        self.status = JobState.of(status)
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
        data = (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            # A full disk (the job filled it): the record rewritten in the blocks it already holds, rather than a job
            # left InProgress with its failure untold; without its indentation where it has outgrown them
            compact = (json.dumps(asdict(self), sort_keys=True, separators=(",", ":")) + "\n").encode()
            if not is_full_disk(exc) or not (_rewrite_in_place(path, data) or _rewrite_in_place(path, compact)):
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
            return
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> JobRecord:
        data = json.loads(path.read_text())
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def _rewrite_in_place(path: Path, data: bytes) -> bool:
    """`data` over the file `path` when it fits in the blocks the file holds (no new block is needed, so a full disk
    cannot stop it half-way); False when it does not fit or `path` is no regular file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or len(data) > st.st_blocks * 512:
            return False
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(data))
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def record_lock(path: Path) -> Iterator[None]:
    """Excludes the other processes that change the same job.json (Slurm's attempt loop in the allocation, a
    launcher refreshing the job's Slurm state, its finisher): each one's read-modify-write is whole."""
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_record(path: Path, change: Callable[[JobRecord], None]) -> JobRecord:
    """Load the record, apply `change`, save it: under record_lock, so no other writer's change is lost."""
    with record_lock(path):
        record = JobRecord.load(path)
        change(record)
        record.save(path)
        return record


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
