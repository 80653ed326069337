"""``smdist logs [JOB] [--host algo-2] [--follow]``: a local job's saved output.

JOB is a job name or a unique prefix of one; without it, the latest job. --follow prints new
lines as the hosts write them and returns when the job has ended."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK

POLL_S = 0.2


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("logs", help="show a local job's output", description=__doc__.splitlines()[0])
    p.add_argument("job", nargs="?", help="job name or unique prefix (default: the latest job)")
    p.add_argument("--host", action="append", metavar="NAME", help="only this host (repeatable), e.g. algo-2")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the job ends")
    p.add_argument("--jobs-dir", help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    p.add_argument("--region", help="AWS region for a SageMaker job not in the jobs folder")
    return p


def find_job(root: Path, wanted: str | None):  # noqa: ANN201 - a JobRecord or an error message
    from ..backends.toolkit.records import list_records

    records = list_records(root)
    if not records:
        from ..backends.toolkit.jobdir import JOBS_ROOT_RULE

        return f"no jobs in {root} (the jobs folder is {JOBS_ROOT_RULE})"
    from ..backends.local.recovery import finalize_if_interrupted

    if wanted is None:
        return finalize_if_interrupted(records[-1])  # a job whose launcher died is finished before it is shown
    exact = [r for r in records if r.job_name == wanted]
    matches = exact or [r for r in records if r.job_name.startswith(wanted)]
    if len(matches) == 1:
        return finalize_if_interrupted(matches[0])
    if not matches:
        return f"job: no job named {wanted!r} in {root}; see `smdist jobs`"
    names = ", ".join(r.job_name for r in matches[:5])
    return f"job: {wanted!r} matches {len(matches)} jobs ({names}); give more of the name"


def _remote_logs(args: argparse.Namespace, not_local: str) -> int:
    from botocore.exceptions import ClientError

    from ..errors import ValidationError
    from .job_lookup import sagemaker_job

    from ..errors import AwsSetupError

    try:
        job = sagemaker_job(args.job, getattr(args, "region", None))
    except AwsSetupError as exc:
        problem(f"{not_local}; and SageMaker cannot be asked: {exc.errors[0]}")
        return EXIT_INVALID
    except (ClientError, ValidationError):
        problem(not_local)
        return EXIT_INVALID
    job.logs(follow=args.follow)
    return EXIT_OK


def _emit(data: bytes) -> None:
    sys.stdout.write(data.decode("utf-8", "replace"))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import JobDir, jobs_root
    from ..backends.toolkit.records import FINAL_STATUSES, INTERRUPTED, JobRecord

    root = jobs_root(args.jobs_dir)
    record = find_job(root, args.job)
    if isinstance(record, str) and args.job:
        return _remote_logs(args, record)  # not in the jobs folder: a SageMaker job?
    if isinstance(record, str):
        problem(record)
        return EXIT_INVALID
    from ..backends import control

    if control.has_own_logs(record):  # e.g. SageMaker: CloudWatch, every host prefixed [algo-N]
        control.control_of(record).follow_logs(Path(record.job_dir), args.follow)
        return EXIT_OK
    job_dir = JobDir(Path(record.job_dir))
    hosts = [h for h in (record.plan or {}).get("hosts", [])]
    names = [h["name"] for h in hosts]
    if args.host:
        unknown = [h for h in args.host if h not in names]
        if unknown:
            problem(f"--host: {', '.join(unknown)} not in job {record.job_name} (hosts: {', '.join(names)})")
            return EXIT_INVALID
        names = args.host
    files = {h: job_dir.log_file(h) for h in names}
    if not args.follow:
        for path in files.values():
            if path.is_file():
                _emit(path.read_bytes())
        return EXIT_OK
    offsets = dict.fromkeys(files, 0)
    partial = dict.fromkeys(files, b"")
    while True:
        now = control.refresh(JobRecord.load(job_dir.record_file))  # read BEFORE the last pass; a Slurm job
        # that Slurm ended itself (scancel, time limit) is finalised by this refresh
        ended = now.status in FINAL_STATUSES or now.launcher_gone()
        got = False
        for h, path in files.items():
            try:
                with open(path, "rb") as f:
                    f.seek(offsets[h])
                    data = f.read()
            except FileNotFoundError:
                continue
            if data:
                got = True
                offsets[h] += len(data)
                data = partial[h] + data
                complete, _, partial[h] = data.rpartition(b"\n")
                if complete:
                    _emit(complete + b"\n")
        if ended and not got:
            for rest in partial.values():
                if rest:
                    _emit(rest + b"\n")
            if now.launcher_gone() or now.status == INTERRUPTED:
                problem(f"job {now.job_name}: its launcher (pid {now.launcher_pid}) is gone without a final "
                        "status (Interrupted): no more output will come")
            return EXIT_OK
        time.sleep(POLL_S)
