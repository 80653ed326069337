"""``smdist report [JOB] [--output FILE]``: one self-contained HTML page of a job kept in a job folder.

Status and attempts, the hosts with their exit codes and a timeline, the failure summary with tracebacks and stack
dumps, the metric plots, links to each host's log: a page to open in a browser or attach to a ticket. JOB is a job
name or a unique prefix of one; without it, the latest job. Written to <job folder>/report.html unless --output."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("report", help="write a job's report as one HTML page",
                              description=__doc__.splitlines()[0])
    p.add_argument("job", nargs="?", help="job name or unique prefix (default: the latest job)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="where to write the page (default: report.html in the job folder; its log links are "
                        "relative to the page, so keep it next to the job folder's logs/)")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import jobs_root
    from ..backends.toolkit.report_page import write_report
    from .job_lookup import find_job

    record = find_job(jobs_root(args.jobs_dir), args.job)
    if isinstance(record, str):
        problem(record)
        return EXIT_INVALID
    try:
        out = write_report(Path(record.job_dir), Path(args.output) if args.output else None)
    except OSError as exc:
        problem(f"report: cannot write {args.output or 'the report'}: {exc}")
        return EXIT_INVALID
    sys.stdout.write(f"{out}\n")  # the page's path alone: `xdg-open "$(smdist report)"`
    return EXIT_OK
