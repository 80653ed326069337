"""``smdist jobs [--jobs-dir DIR] [--json]``: the local jobs, oldest first, from their job.json records."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from ..backends.phases import Phase
from ..backends.states import JobState
from .job_loading import EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("jobs", help="list local jobs and their status",
                              description="List the local jobs recorded in the jobs folder.")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    p.add_argument("--json", action="store_true", help="print the records as JSON lines")
    p.add_argument("--sagemaker", action="store_true",
                   help="also list the region's recent SageMaker training jobs (ListTrainingJobs), not only those "
                        "submitted from here")
    p.add_argument("--region", help="with --sagemaker: the AWS region (default: $AWS_REGION / the profile)")
    return p


_REMOTE = ("sagemaker", "slurm", "kubernetes")  # backends whose jobs run without a launcher process on this machine


def _refreshed(records: list) -> list:
    """Remote jobs brought up to date by their backend (best effort: an unreachable backend keeps the stored status)."""
    from ..backends.toolkit.records import JobRecord
    from .job_lookup import backend_of

    out = []
    for r in records:
        try:
            if r.backend in _REMOTE and r.status == JobState.IN_PROGRESS:
                backend, handle = backend_of(r)
                backend.describe(handle)  # brings the record in the job folder up to date
                r = JobRecord.load(Path(r.job_dir) / "job.json")
            out.append(r)
        except Exception:  # noqa: BLE001 - a listing must not fail because one backend cannot be reached
            out.append(r)
    return out


def _sagemaker_records(region: str | None, known: set[str]) -> list:
    """Recent training jobs of the region (ListTrainingJobs) as records, those not already in the jobs folder."""
    from ..backends.sagemaker.attach import checked_clients
    from ..backends.toolkit.records import JobRecord

    clients = checked_clients(region)
    out = []
    for job in clients.sagemaker.list_training_jobs(MaxResults=50, SortBy="CreationTime")["TrainingJobSummaries"]:
        if job["TrainingJobName"] in known:
            continue
        end = job.get("TrainingEndTime")
        state = JobState.of(job["TrainingJobStatus"])  # ListTrainingJobs gives no SecondaryStatus
        out.append(JobRecord(job_name=job["TrainingJobName"], job_id=job["TrainingJobName"], job_dir="", status=state,
                             phase=Phase.DONE if state.is_terminal else Phase.RUNNING,
                             created=job["CreationTime"].timestamp(),
                             ended=end.timestamp() if end else None, backend="sagemaker",
                             backend_info={"region": clients.region, "arn": job.get("TrainingJobArn")}))
    return sorted(out, key=lambda r: r.created)


def status_of(record) -> str:  # a JobRecord (import kept lazy)
    if record.backend in _REMOTE:
        return record.status  # the backend answers (refreshed by `smdist jobs`), not a launcher process here
    if record.launcher_gone():
        return JobState.INTERRUPTED  # the launcher died without writing a final status
    return record.status


def rows(records: list) -> list[list[str]]:
    out = []
    for r in records:
        plan = r.plan or {}
        duration = r.duration if r.duration is not None else time.time() - r.created
        out.append([
            r.job_name, status_of(r), r.phase, str(plan.get("strategy", "")),
            f"{plan.get('instance_count', '?')}x{plan.get('processes_per_host', '?')}",
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created)), f"{duration:.1f}s",
            r.failure_reason or r.model_data or "",
        ])
    return out


HEADER = ["NAME", "STATUS", "PHASE", "STRATEGY", "HOSTSxPROCS", "CREATED", "DURATION", "RESULT"]


def run(args: argparse.Namespace) -> int:
    from ..backends.local.recovery import finalize_interrupted
    from ..backends.toolkit.jobdir import JOBS_ROOT_RULE, jobs_root
    from ..backends.toolkit.records import list_records

    root = jobs_root(args.jobs_dir)
    records = _refreshed(finalize_interrupted(list_records(root)))  # a dead launcher's job is finished here
    if getattr(args, "sagemaker", False):
        from ..errors import ValidationError
        from .console import problem

        try:
            records += _sagemaker_records(args.region, {r.job_name for r in records})
        except ValidationError as exc:  # no region / credentials: say so, still list the local jobs
            problem(f"--sagemaker: {exc.errors[0]}")
    if args.json:
        for r in records:
            sys.stdout.write(json.dumps({**r.__dict__, "status": status_of(r), "plan": None}) + "\n")
        return EXIT_OK
    if not records:
        sys.stdout.write(f"no jobs in {root}\n(the jobs folder is {JOBS_ROOT_RULE})\n")
        return EXIT_OK
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    for line in render(rows(records), width):
        sys.stdout.write(line + "\n")
    return EXIT_OK


# Dropped in this order when a terminal is too narrow; NAME, STATUS and RESULT always stay.
_OPTIONAL = ("PHASE", "STRATEGY", "CREATED", "HOSTSxPROCS", "DURATION")


def render(table: list[list[str]], width: int | None = None) -> list[str]:
    """Aligned columns. The name is never cut (`smdist logs` needs it whole); in a terminal of ``width`` columns the
    optional columns go first, then the last one (the result: a failure reason or the model's path) is shortened."""
    keep = list(range(len(HEADER)))

    def lines_of(cols: list[int]) -> tuple[list[str], list[int]]:
        picked = [[row[i] for i in cols] for row in [HEADER, *table]]
        widths = [max(len(c) for c in col) for col in zip(*picked, strict=True)]
        return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in picked], widths

    lines, widths = lines_of(keep)
    for name in _OPTIONAL:
        if not width or max(len(line) for line in lines) <= width:
            break
        keep.remove(HEADER.index(name))
        lines, widths = lines_of(keep)
    if width:
        lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
        if width - lead > 10:  # narrower than that, shortening does not help: let the terminal wrap
            lines = [line if len(line) <= width else line[:width - 1] + "…" for line in lines]
    return lines
