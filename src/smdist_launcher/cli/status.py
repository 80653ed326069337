"""``smdist status NAME [--json]``: a job's status, wherever it runs (local, slurm, SageMaker, ...).

NAME is a job in the jobs folder (exact or a unique prefix; its record says its backend), else a SageMaker job."""
from __future__ import annotations

import argparse
import json
import sys

from ..backends.states import JobState
from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("status", help="show a job's status (local or SageMaker)",
                              description=__doc__.splitlines()[0])
    p.add_argument("job", help="job name (or a unique prefix of a local job's)")
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")
    p.add_argument("--region", help="AWS region for a SageMaker job not in the jobs folder")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    return p


def status_fields(args: argparse.Namespace) -> dict | str:
    """{name, backend, status, phase, failure_reason, model_data}, or why there is none."""
    from .job_lookup import backend_of, local_record, sagemaker_handle

    record = local_record(args.jobs_dir, args.job)
    backend, handle = backend_of(record) if record is not None else sagemaker_handle(args.job, args.region)
    if record is not None:
        fields = backend.describe(handle).summary()
        from .jobs import status_of  # a job whose launcher is gone reads Interrupted

        running = fields["status"] == JobState.IN_PROGRESS
        return {**fields, "status": status_of(record) if running else fields["status"]}
    from botocore.exceptions import ClientError

    try:
        return backend.describe(handle).summary()
    except ClientError as exc:
        return (f"job: no job named {args.job!r} in the jobs folder or on SageMaker "
                f"({exc.response['Error'].get('Message', '')})")


def run(args: argparse.Namespace) -> int:
    from ..errors import ValidationError

    try:
        fields = status_fields(args)
    except ValidationError as exc:  # no region / credentials for a SageMaker lookup
        for item in exc.errors:
            problem(str(item))
        return EXIT_INVALID
    if isinstance(fields, str):
        problem(fields)
        return EXIT_INVALID
    if args.json:
        sys.stdout.write(json.dumps(fields) + "\n")
        return EXIT_OK
    line = f"{fields['name']}  {fields['status']}" + (f" / {fields['phase']}" if fields.get("phase") else "")
    line += f"  ({fields['backend']})"
    sys.stdout.write(line + "\n")
    for key in ("failure_reason", "model_data"):
        if fields.get(key):
            sys.stdout.write(f"  {key}: {fields[key]}\n")
    attempts = fields.get("attempts") or []
    for a in attempts if len(attempts) > 1 or any(a.get("warning") for a in attempts) else []:
        steps = ", ".join(f"{k} {v}" for k, v in (a.get("first_steps") or {}).items())
        sys.stdout.write(f"  attempt {a['attempt']}: {a['cause']}" + (f" (began at {steps})" if steps else "")
                         + (f": {a['reason']}" if a.get("reason") and a["cause"] != "completed" else "")
                         + (f" -> {a['why']}" if a.get("decision") == "retry" else "")
                         + (f" (its files: {a['kept']}/)" if a.get("kept") else "") + "\n")
        if a.get("warning"):
            sys.stdout.write(f"    warning: {a['warning']}\n")
    for monitor, ranks in (fields.get("stragglers") or {}).items():
        sys.stdout.write(f"  stragglers ({monitor}): rank(s) {', '.join(map(str, ranks))} far behind the others\n")
    return EXIT_OK
