"""``smdist rm JOB...``: remove local jobs' folders (logs, sandboxes, outputs). A running job is refused."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .console import problem
from .job_loading import EXIT_DIFFERS, EXIT_INVALID, EXIT_OK

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.toolkit.records import JobRecord


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("rm", help="remove local jobs", description=__doc__.splitlines()[0])
    p.add_argument("jobs", nargs="+", metavar="JOB", help="job name or unique prefix (see `smdist jobs`)")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    return p


def refusal(record) -> str | None:  # a JobRecord (import kept lazy)
    """Why this job must not be removed now, or None."""
    from ..backends.toolkit.records import IN_PROGRESS
    from .jobs import _REMOTE, status_of

    if status_of(record) != IN_PROGRESS:
        return None
    if record.backend in _REMOTE:
        return (f"{record.job_name}: still running on {record.backend}; `smdist stop {record.job_name}` first, "
                "then remove it")
    return (f"{record.job_name}: still running (launcher pid {record.launcher_pid}); stop it first "
            f"(Ctrl-C where it runs, or `smdist stop {record.job_name}`), then remove it")


def remove(root: Path, record) -> None:  # a JobRecord
    """Delete the job's folder. The path comes from the jobs root and the checked name, never from the record's
    job_dir field, so that a tampered record cannot point the removal elsewhere."""
    from ..backends.toolkit.jobdir import check_job_name

    shutil.rmtree(root / check_job_name(record.job_name))


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import jobs_root
    from .job_lookup import find_job

    root = jobs_root(args.jobs_dir)
    found: list[JobRecord] = []
    errors: list[str] = []
    for wanted in args.jobs:
        record = find_job(root, wanted)
        if isinstance(record, str):
            errors.append(record)
        elif record.job_name not in {r.job_name for r in found}:
            found.append(record)
    if errors:  # a typo removes nothing: all names are checked before anything is deleted
        for line in errors:
            problem(line)
        return EXIT_INVALID
    code = EXIT_OK
    for record in found:
        why = refusal(record)
        if why:
            problem(why)
            code = EXIT_DIFFERS
            continue
        remove(root, record)
        sys.stdout.write(f"removed {record.job_name}\n")
    return code
