"""``smdist prune [--older-than 7d] [--status failed ...] [--dry-run]``: remove ended local jobs.

Without filters every ended job goes; running jobs are never touched."""
from __future__ import annotations

import argparse
import re
import sys
import time

from ..backends.states import TERMINAL_STATES, JobState
from .job_loading import EXIT_OK

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def statuses() -> tuple[str, ...]:
    """What `smdist jobs` shows for an ended job (matched without regard to case): the terminal job states."""
    return tuple(state.value for state in JobState if state in TERMINAL_STATES)


def age(text: str) -> float:
    """'7d' → seconds; argparse turns the ValueError into a usage error (exit 2)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age; use a number and a unit: 30m, 12h, 7d, 2w")
    return float(match.group(1)) * _UNITS[match.group(2)]


def status(text: str) -> str:
    for name in statuses():
        if name.lower() == text.lower():
            return name
    raise argparse.ArgumentTypeError(f"{text!r} is not a job status; "
                                     f"use one of {', '.join(s.lower() for s in statuses())}")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("prune", help="remove ended local jobs", description=__doc__.splitlines()[0])
    p.add_argument("--older-than", type=age, metavar="AGE",
                   help="only jobs created longer ago than AGE (30m, 12h, 7d, 2w)")
    p.add_argument("--status", type=status, nargs="+", metavar="STATUS",
                   help=f"only jobs with one of these statuses ({', '.join(s.lower() for s in statuses())})")
    p.add_argument("--dry-run", "-n", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import jobs_root
    from ..backends.toolkit.records import list_records
    from .jobs import status_of
    from .rm import refusal, remove

    root = jobs_root(args.jobs_dir)
    now = time.time()
    removed = 0
    from ..backends.local.recovery import finalize_interrupted

    for record in finalize_interrupted(list_records(root)):
        if refusal(record):
            continue
        if args.status and status_of(record) not in args.status:
            continue
        if args.older_than is not None and now - record.created <= args.older_than:
            continue
        if not args.dry_run:
            remove(root, record)
        removed += 1
        sys.stdout.write(f"{'would remove' if args.dry_run else 'removed'} {record.job_name}\n")
    if not removed:
        sys.stdout.write(f"nothing to prune in {root}\n")
    return EXIT_OK
