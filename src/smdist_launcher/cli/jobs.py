"""``smdist jobs [--jobs-dir DIR] [--json]``: the local jobs, oldest first, from their job.json records."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .job_loading import EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("jobs", help="list local jobs and their status",
                              description="List the local jobs recorded in the jobs folder.")
    p.add_argument("--jobs-dir", help="jobs folder (default: $SMDIST_JOBS_DIR or ./.smdist/jobs)")
    p.add_argument("--json", action="store_true", help="print the records as JSON lines")
    return p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status_of(record) -> str:  # noqa: ANN001 - a JobRecord (import kept lazy)
    from ..backends.local.records import IN_PROGRESS

    if record.status == IN_PROGRESS and not _alive(record.launcher_pid):
        return "Interrupted"  # the launcher died without writing a final status
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
    from ..backends.local.jobdir import jobs_root
    from ..backends.local.records import list_records

    root = jobs_root(args.jobs_dir)
    records = list_records(root)
    if args.json:
        for r in records:
            sys.stdout.write(json.dumps({**r.__dict__, "status": status_of(r), "plan": None}) + "\n")
        return EXIT_OK
    if not records:
        sys.stdout.write(f"no jobs in {root}\n")
        return EXIT_OK
    table = rows(records)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        t = Table(*HEADER, title=str(root))
        for row in table:
            t.add_row(*row)
        Console().print(t)
        return EXIT_OK
    widths = [max(len(c) for c in col) for col in zip(HEADER, *table)]
    for row in [HEADER, *table]:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    return EXIT_OK
