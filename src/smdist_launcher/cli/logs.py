"""``smdist logs [JOB] [--host algo-2] [--follow]``: a local job's saved output.

JOB is a job name or a unique prefix of one; without it, the latest job. --follow prints new
lines as the hosts write them and returns when the job has ended."""
from __future__ import annotations

import argparse

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("logs", help="show a local job's output", description=__doc__.splitlines()[0])
    p.add_argument("job", nargs="?", help="job name or unique prefix (default: the latest job)")
    p.add_argument("--host", action="append", metavar="NAME", help="only this host (repeatable), e.g. algo-2")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the job ends")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    p.add_argument("--region", help="AWS region for a SageMaker job not in the jobs folder")
    return p


def _remote_logs(args: argparse.Namespace, not_local: str) -> int:
    from botocore.exceptions import ClientError

    from ..errors import AwsSetupError, ValidationError
    from .job_lookup import sagemaker_handle

    backend, handle = sagemaker_handle(args.job, getattr(args, "region", None))
    try:
        backend.logs(handle, follow=args.follow)
    except AwsSetupError as exc:
        problem(f"{not_local}; and SageMaker cannot be asked: {exc.errors[0]}")
        return EXIT_INVALID
    except (ClientError, ValidationError):
        problem(not_local)
        return EXIT_INVALID
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import jobs_root
    from .job_lookup import backend_of, find_job

    record = find_job(jobs_root(args.jobs_dir), args.job)
    if isinstance(record, str) and args.job:
        return _remote_logs(args, record)  # not in the jobs folder: a SageMaker job?
    if isinstance(record, str):
        problem(record)
        return EXIT_INVALID
    backend, handle = backend_of(record)
    try:
        backend.logs(handle, hosts=args.host, follow=args.follow)
    except ValueError as exc:  # an unknown --host
        problem(str(exc))
        return EXIT_INVALID
    return EXIT_OK
