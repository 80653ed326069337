"""``smdist metrics [JOB] [--format table|json|csv] [--plot FILE.png]``: a job's training and system metrics.

Per metric its last, min, max and count, per host/rank when they differ. A job of the jobs folder is read from its
metrics.jsonl (any backend, also while it runs); a job known only to SageMaker is read from CloudWatch."""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK

if TYPE_CHECKING:  # pragma: no cover
    from ..metrics.store import MetricPoint
    from ..metrics.summary import MetricSummary

FORMATS = ("table", "json", "csv")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("metrics", help="show a job's training and system metrics",
                              description=__doc__.splitlines()[0])
    p.add_argument("job", nargs="?", help="job name or unique prefix (default: the latest job)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table (default), json (summary and every point per series) or csv (every point)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw one panel per metric, one line per host/rank "
                                                      "(needs matplotlib: pip install 'smdist-launcher[plot]')")
    p.add_argument("--x", choices=("time", "step"), default="time",
                   help="the plot's x axis: seconds since start (default) or the step (when a step was captured)")
    p.add_argument("--jobs-dir",
                   help="jobs folder (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above)")
    p.add_argument("--region", help="AWS region for a SageMaker job not in the jobs folder")
    return p


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _where(s: MetricSummary) -> tuple[str, str]:
    return s.host, "" if s.rank is None else str(s.rank)


def table_rows(summaries: Sequence[MetricSummary]) -> list[list[str]]:
    return [[s.name, s.kind, *_where(s), _fmt(s.last), _fmt(s.min), _fmt(s.max), str(s.count),
             "" if s.last_step is None else str(s.last_step)] for s in summaries]


HEADER = ["metric", "kind", "host", "rank", "last", "min", "max", "count", "step"]


def render_table(summaries: Sequence[MetricSummary]) -> str:
    rows = [HEADER, *table_rows(summaries)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows) + "\n"


def render_json(job: str, points: Sequence[MetricPoint]) -> str:
    from ..metrics.summary import series, summarize

    out = {"job": job, "summary": [s.to_dict() for s in summarize(points)],
           "series": [{"name": name, "kind": kind, "host": host, "rank": rank,
                       "points": [{"timestamp": p.timestamp, "value": p.value, "step": p.step} for p in pts]}
                      for (kind, name, host, rank), pts in series(points).items()]}
    return json.dumps(out, indent=2) + "\n"


def write_csv(points: Iterable[MetricPoint], out: IO[str]) -> None:
    """One row per point, written as the points come (a store of millions never held)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "kind", "host", "rank", "step", "timestamp", "value"])
    for p in points:
        writer.writerow([p.name, p.kind, p.host, "" if p.rank is None else p.rank,
                         "" if p.step is None else p.step, f"{p.timestamp:.3f}", repr(p.value)])


def _show_table(summaries: Sequence[MetricSummary]) -> None:
    if not sys.stdout.isatty():
        sys.stdout.write(render_table(summaries))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(*HEADER, box=None, header_style="bold")
    for row in table_rows(summaries):
        table.add_row(*map(Text, row))  # a metric name such as `loss[/b]` is text, not markup
    Console().print(table)


def _sagemaker_points(name: str, region: str | None) -> list[MetricPoint] | str:
    """The job's CloudWatch metrics, or why they cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    from ..backends.sagemaker.aws import AwsClients, resolve_region
    from ..backends.sagemaker.metrics import job_window, read_cloudwatch
    from ..errors import AwsSetupError

    try:
        clients = AwsClients(resolve_region(region))
        start, end = job_window(clients.sagemaker, name)
        return read_cloudwatch(clients.client("cloudwatch"), name, start, end)
    except AwsSetupError as exc:
        return f"job: {name!r} is not in the jobs folder, and SageMaker cannot be asked: {exc.errors[0]}"
    except (ClientError, BotoCoreError) as exc:
        return f"job: {name!r} is not in the jobs folder, and SageMaker/CloudWatch answered: {exc}"


def run(args: argparse.Namespace) -> int:
    from ..backends.toolkit.jobdir import jobs_root
    from ..metrics.store import iter_points
    from ..metrics.summary import Digest
    from .job_lookup import find_job

    record = find_job(jobs_root(args.jobs_dir), args.job)
    if isinstance(record, str) and not args.job:
        problem(record)
        return EXIT_INVALID
    if isinstance(record, str):
        found = _sagemaker_points(args.job, args.region)
        if isinstance(found, str):
            problem(f"{record}\n{found}")
            return EXIT_INVALID
        job_name, fetched = args.job, sorted(found, key=lambda p: p.timestamp)
        points: Callable[[], Iterable[MetricPoint]] = lambda: fetched  # noqa: E731
    else:
        job_name, job_dir = record.job_name, Path(record.job_dir)
        points = lambda: iter_points(job_dir)  # noqa: E731  - a store is read as it streams, never held whole
    if args.format == "json":
        sys.stdout.write(render_json(job_name, list(points())))  # an export of every point, grouped by series
    elif args.format == "csv":
        write_csv(points(), sys.stdout)
    if args.format != "table" and not args.plot:
        return EXIT_OK
    digest = Digest(points())
    if args.format == "table" and digest.count:
        _show_table(digest.summaries())
    elif args.format == "table":
        print(f"job {job_name}: no metrics recorded (give metric_definitions to parse the ranks' output; system "
              "metrics are sampled every few seconds while hosts run)")
    if args.plot:
        return _plot(job_name, digest.plotted_points(), Path(args.plot), args.x)
    return EXIT_OK


def _plot(job_name: str, points: Sequence[MetricPoint], out: Path, x: str) -> int:
    from ..metrics.plot import PlotUnavailable, plot_points

    try:
        panels = plot_points(points, out, x=x, title=job_name)
    except PlotUnavailable as exc:
        problem(f"--plot: {exc}")
        return EXIT_INVALID
    except OSError as exc:
        problem(f"--plot: cannot write {out}: {exc}")
        return EXIT_INVALID
    print(f"wrote {out} ({panels} panel{'s' if panels != 1 else ''})", file=sys.stderr)
    return EXIT_OK
