"""The metrics store of a job: one JSON object per line in `<job folder>/metrics.jsonl`.

Each line is a MetricPoint (`name, value, timestamp, host, rank, step, kind`). Writers append and flush at most every
FLUSH_EVERY_S (and at close), so a reader (`smdist metrics`, serve) sees them while the job runs, at most that late
while points keep coming (the system sampler writes every few seconds): a flush per point cost a system call for every
log line of a chatty job. A host that writes from another
machine (a Slurm node on a shared file system) writes its own `metrics.<host>.jsonl`: appends from several NFS
clients to one file may interleave. `iter_points` reads them all, oldest first.

System metrics (kind "system", rank None) carry SageMaker's host metric names; a GPU's own series has its NVML index
as a suffix (`GPUUtilization.0`): see system.py."""
from __future__ import annotations

import functools
import heapq
import json
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

STORE_FILE = "metrics.jsonl"
FLUSH_EVERY_S = 0.5
TRAINING, SYSTEM = "training", "system"


@dataclass(frozen=True)
class MetricPoint:
    name: str
    value: float
    timestamp: float           # epoch seconds
    host: str
    rank: int | None = None    # None: a host-level point (system metrics, a line without a rank prefix)
    step: int | None = None    # the rank's last step seen in its output (a resilience.log_monitoring capture)
    kind: str = TRAINING       # or SYSTEM

    def to_json(self) -> str:
        """One line of the store. Written by hand: it runs for every parsed line, and dataclasses.asdict and
        json.dumps of a dict cost several times more (benchmarks/metrics_overhead.py)."""
        value, timestamp = float(self.value), float(self.timestamp)
        if not (math.isfinite(value) and math.isfinite(timestamp)):
            return json.dumps(asdict(self), separators=(",", ":"))
        return (f'{{"name":{_quoted(self.name)},"value":{value!r},"timestamp":{timestamp!r},'
                f'"host":{_quoted(self.host)},"rank":{_number(self.rank)},"step":{_number(self.step)},'
                f'"kind":{_quoted(self.kind)}}}')

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> MetricPoint:
        rank, step = data.get("rank"), data.get("step")
        return cls(name=str(data["name"]), value=float(data["value"]),  # type: ignore[arg-type]
                   timestamp=float(data["timestamp"]), host=str(data["host"]),  # type: ignore[arg-type]
                   rank=None if rank is None else int(rank),  # type: ignore[call-overload]
                   step=None if step is None else int(step),  # type: ignore[call-overload]
                   kind=str(data.get("kind", TRAINING)))


@functools.lru_cache(maxsize=1024)
def _quoted(text: str) -> str:
    return json.dumps(text)  # the few names and hosts of a job, each encoded once


def _number(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def host_store_file(host: str) -> str:
    """The store file of one host writing from its own machine (Slurm)."""
    return f"metrics.{host}.jsonl"


class MetricWriter:
    """Appends points to one file, created with the first point (a job without metrics leaves none); safe to share
    between threads (the log readers and the sampler)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._closed = False
        self._flushed = 0.0

    def write(self, point: MetricPoint) -> None:
        self.write_many([point])

    def write_many(self, points: list[MetricPoint]) -> None:
        if not points:
            return
        text = "".join(p.to_json() + "\n" for p in points)
        with self._lock:
            if self._closed:
                return  # the job is over: late lines are dropped
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self._file.write(text)
            now = time.monotonic()
            if now - self._flushed >= FLUSH_EVERY_S:  # whole lines only: the buffer ends with a newline
                self._file.flush()
                self._flushed = now

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None


def store_files(job_dir: Path) -> list[Path]:
    """The job's store files: metrics.jsonl and any per-host metrics.<host>.jsonl."""
    main = job_dir / STORE_FILE
    return ([main] if main.is_file() else []) + sorted(job_dir.glob("metrics.*.jsonl"))


def read_file(path: Path) -> list[MetricPoint]:
    """The points of one store file; a torn line (a writer killed mid-line, or still writing) is skipped."""
    return list(file_points(path))


def file_points(path: Path) -> Iterator[MetricPoint]:
    """The points of one store file in the order they were written, read a line at a time (a chatty job's store
    reaches gigabytes); a torn line is skipped, a missing file has none."""
    try:
        f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
    except OSError:
        return
    with f:
        yield from parse_lines(f)


def parse_lines(lines: Iterable[str | bytes]) -> Iterator[MetricPoint]:
    """The points of store lines; a torn or foreign line is skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            yield MetricPoint.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue


def _reordered(points: Iterable[MetricPoint], window: int) -> Iterator[MetricPoint]:
    """`points` by timestamp, as long as none is more than `window` places from its place: a writer's threads (log
    readers, the sampler) stamp a point before they take the file's lock, so a file is in time order but for
    neighbours."""
    heap: list[tuple[float, int, MetricPoint]] = []
    for n, p in enumerate(points):
        heapq.heappush(heap, (p.timestamp, n, p))
        if len(heap) > window:
            yield heapq.heappop(heap)[2]
    while heap:
        yield heapq.heappop(heap)[2]


REORDER_WINDOW = 1024  # points a file's reading holds to put neighbours in time order


def iter_points(job_dir: Path) -> Iterator[MetricPoint]:
    """Every point of a job, oldest first, holding a window of each store file rather than the store (delivering a
    job's metrics at its end)."""
    return heapq.merge(*(_reordered(file_points(f), REORDER_WINDOW) for f in store_files(job_dir)),
                       key=lambda p: p.timestamp)


def read_points(job_dir: Path) -> list[MetricPoint]:
    """Every point of a job, oldest first, held in a list; [] when the job has none (yet). Readers of a whole store
    (the report, `smdist metrics`, a job's end) stream it with iter_points instead. Sorted, since iter_points is in
    time order only within a window of neighbours (a clock stepped back); nearly sorted, it sorts in one pass."""
    points = list(iter_points(job_dir))
    points.sort(key=lambda p: p.timestamp)
    return points
