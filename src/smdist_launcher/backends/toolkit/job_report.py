"""What `smdist report` shows of a job, read from its job folder only (any backend that keeps one: process, netns,
docker, Slurm): the record (status, phases, attempts), each host (exit code, what its runtime reported in
failure.json, its ranks' exits and stack dumps, the end of its log), the failure diagnosis, the metrics store.

Nothing here renders: report_page.py turns a JobReport into HTML."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...contract import MLPaths
from ...contract.no_follow import read_host_file
from ...metrics.store import iter_points
from ...metrics.summary import Digest
from .attempt.kept_layout import kept_attempts
from .diagnosis import describe_failure, first_failure, read_failures
from .jobdir import JobDir
from .log_mux import tail
from .records import COMPLETED, FAILED, INTERRUPTED, JobRecord

LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class RankExit:
    """A rank that left through exit() (the local job's preload library notes it: <pid>.exit)."""

    rank: int
    pid: int
    code: int
    time: float  # epoch seconds


@dataclass(frozen=True)
class RankDump:
    """Where a rank was when it was asked (stopped, hung): faulthandler's lines from its <pid>.txt."""

    rank: int
    pid: int
    lines: list[str]


@dataclass(frozen=True)
class HostReport:
    name: str
    exit_code: int | None
    detail: dict[str, Any]            # the record's other facts of the host: gpus, address, container...
    log_file: Path
    log_tail: list[str]
    failure: dict[str, Any] | None    # its runtime's failure.json (the last attempt's)
    rank_exits: list[RankExit] = field(default_factory=list)
    dumps: list[RankDump] = field(default_factory=list)

    @property
    def ended(self) -> float | None:
        """When the host's work ended, as far as its files say: its failure, else its last rank's exit."""
        if self.failure and self.failure.get("time"):
            return float(self.failure["time"]) / 1e9
        return max((e.time for e in self.rank_exits), default=None)


@dataclass(frozen=True)
class JobReport:
    job_dir: Path
    record: JobRecord
    hosts: list[HostReport]
    diagnosis: str | None                       # the failure summary of a failed job (first failing host/rank)
    earlier_failures: dict[int, list[dict[str, Any]]]  # attempt number -> what its hosts reported in failure.json
    metrics: Digest                             # the job's points, read once in bounded memory

    @property
    def name(self) -> str:
        return self.record.job_name


def _host_paths(job: JobDir, record: JobRecord, host: str) -> MLPaths:
    return MLPaths(Path((record.hosts.get(host) or {}).get("root") or job.host_root(host)))


def _rank_files(stacks: Path) -> tuple[list[RankExit], list[RankDump]]:
    exits, dumps = [], []
    for path in sorted(stacks.glob("*.txt")) if stacks.is_dir() else []:
        if not path.stem.isdigit():
            continue
        try:
            head, _, rest = read_host_file(path).decode("utf-8", "replace").partition("\n")
            rank = int(json.loads(head)["rank"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        lines = [line for line in rest.splitlines() if line.strip()]
        if lines:
            dumps.append(RankDump(rank, int(path.stem), lines))
        try:
            note = json.loads(read_host_file(path.with_suffix(".exit")))
            exits.append(RankExit(rank, int(path.stem), int(note["code"]), int(note["time_ns"]) / 1e9))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # still running when the job ended, or killed: no exit() ran
    return sorted(exits, key=lambda e: e.time), sorted(dumps, key=lambda d: d.rank)


def _earlier_failures(job: JobDir) -> dict[int, list[dict[str, Any]]]:
    """What each earlier attempt's hosts reported in failure.json, read from their kept trees
    (attempts/<n>/<host>/: attempt/kept_layout.py)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for number, hosts in kept_attempts(job).items():
        found = read_failures({h: paths.failure_json_file for h, paths in hosts.items()})
        if found:
            out[number] = found
    return out


def read_report(job_dir: Path) -> JobReport:
    """Everything the report shows of the job in `job_dir` (FileNotFoundError without a job.json there)."""
    job = JobDir(job_dir)
    record = JobRecord.load(job.record_file)
    names = [h["name"] for h in (record.plan or {}).get("hosts", [])] or sorted(record.hosts)
    hosts = []
    for name in names:
        paths = _host_paths(job, record, name)
        info = dict(record.hosts.get(name) or {})
        failures = read_failures({name: paths.failure_json_file})
        exits, dumps = _rank_files(paths.run_dir / "stacks")
        hosts.append(HostReport(name=name, exit_code=info.pop("exit_code", None),
                                detail={k: v for k, v in info.items() if k != "root" and v not in (None, [], {})},
                                log_file=job.log_file(name), log_tail=tail(job.log_file(name), LOG_TAIL_LINES),
                                failure=failures[0] if failures else None, rank_exits=exits, dumps=dumps))
    diagnosis = None
    if record.status in (FAILED, INTERRUPTED) and any(h.failure for h in hosts):
        # the launcher's own words for the first failing host/rank, read again from the same files
        _reason, diagnosis = describe_failure({h.name: _host_paths(job, record, h.name).failure_json_file
                                               for h in hosts}, {h.name: h.log_file for h in hosts}, None)
    elif record.status != COMPLETED and record.failure_reason:
        diagnosis = record.failure_reason  # stopped, hung, out of time: the reason names the ranks still running
    return JobReport(job_dir=job.root, record=record, hosts=hosts, diagnosis=diagnosis,
                     earlier_failures=_earlier_failures(job), metrics=Digest(iter_points(job.root)))


def first_failing_host(report: JobReport) -> str | None:
    """The host the diagnosis names first (highlighted in the page)."""
    first = first_failure([h.failure for h in report.hosts if h.failure])
    return str(first.get("host")) if first else None
