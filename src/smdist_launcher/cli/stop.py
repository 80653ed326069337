"""``smdist stop NAME``: stop a job wherever it runs (the launcher of a local job; StopTrainingJob; scancel)."""
from __future__ import annotations

import argparse
import sys

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("stop", help="stop a running job (local or SageMaker)",
                              description=__doc__.splitlines()[0])
    p.add_argument("job", help="job name (or a unique prefix of a local job's)")
    p.add_argument("--region", help="AWS region for a SageMaker job not in the jobs folder")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    return p


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import ClientError

    from ..errors import ValidationError
    from .job_lookup import backend_of, local_record, sagemaker_handle

    record = local_record(args.jobs_dir, args.job)
    backend, handle = backend_of(record) if record is not None else sagemaker_handle(args.job, args.region)
    try:
        sys.stdout.write(backend.stop(handle) + "\n")
    except ValidationError as exc:
        for item in exc.errors:
            problem(str(item))
        return EXIT_INVALID
    except ClientError as exc:
        problem(f"job: cannot stop {args.job!r}: {exc.response['Error'].get('Message', exc)}")
        return EXIT_INVALID
    return EXIT_OK
