"""A JobReport (job_report.py) as one self-contained HTML page: status and attempts, the hosts with their exit codes
and a timeline, the failure summary with tracebacks and stack dumps, the metrics (a table and PNG plots as data:
URIs), links to each host's log.

Self-contained and inert, so it can be attached to a ticket: no external resource, no script (its
Content-Security-Policy forbids both), every value from the job escaped."""
from __future__ import annotations

import base64
import datetime as dt
import html
import io
import os
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...metrics.store import TRAINING, MetricPoint
from ..api import JobState
from ..phases import Phase
from .job_report import JobReport, first_failing_host

# Only inline styles and data: images; no script, no fetch, no frame, no form.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_STATUS_COLOURS: dict[str, str] = {
    JobState.COMPLETED: "#1a7f37", JobState.FAILED: "#cf222e", JobState.INTERRUPTED: "#cf222e",
    JobState.STOPPED: "#9a6700", JobState.MAX_RUNTIME_EXCEEDED: "#9a6700", JobState.IN_PROGRESS: "#0969da"}
_PHASE_COLOURS: dict[str, str] = {
    Phase.CREATED: "#d0d7de", Phase.QUEUED: "#eaeef2", Phase.STAGING: "#a5d6ff", Phase.STARTING: "#80ccff",
    Phase.RUNNING: "#54aeff", Phase.UPLOADING: "#b392f0", Phase.DONE: "#8c959f"}
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1f2328;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f6f8fa}pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;margin:4px 0}
.status{color:#fff;border-radius:10px;padding:1px 10px;font-weight:600}.muted{color:#59636e}
.lane{position:relative;height:18px;background:#f6f8fa;border:1px solid #d0d7de;min-width:500px}
.seg{position:absolute;top:0;height:100%;font-size:11px;overflow:hidden;white-space:nowrap;color:#1f2328;
box-sizing:border-box;padding:0 3px;text-overflow:clip}
.tick{position:absolute;top:-2px;width:2px;height:22px;background:#1f2328}
.first{background:#ffebe9}img.plot{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
table.timeline{width:100%}table.timeline td:last-child{width:100%}
table.timeline td:first-child{white-space:nowrap}.seg-key{padding:0 6px;border-radius:3px}
"""


@dataclass(frozen=True)
class Plot:
    title: str
    png: bytes


def metric_plots(points: list[MetricPoint]) -> list[Plot] | str:
    """One PNG per metric (training first), one line per host/rank; or why there are none (no matplotlib)."""
    from ...metrics.plot import PlotUnavailable, plot_points

    by_metric: dict[tuple[str, str], list[MetricPoint]] = {}
    for p in points:
        by_metric.setdefault((p.kind, p.name), []).append(p)
    plots = []
    for kind, name in sorted(by_metric, key=lambda k: (k[0] != TRAINING, list(by_metric).index(k))):
        out = io.BytesIO()
        try:
            plot_points(by_metric[(kind, name)], out)
        except PlotUnavailable as exc:
            return str(exc)
        plots.append(Plot(f"{name} ({kind})", out.getvalue()))
    return plots


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], row_class: Iterable[str] = (), css: str = "") -> str:
    """A table of already-escaped cells (no header row when `head` is empty)."""
    classes = list(row_class)
    body = []
    for i, row in enumerate(rows):
        row_css = classes[i] if i < len(classes) else ""
        body.append((f'<tr class="{row_css}">' if row_css else "<tr>") + "".join(f"<td>{c}</td>" for c in row)
                    + "</tr>")
    heads = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f'<table class="{css}">' if css else "<table>") + (f"<tr>{heads}</tr>" if heads else "") + "".join(
        body) + "</table>"


def _link(target: Path, page_dir: Path, text: str) -> str:
    """A link relative to the page's folder (the page moves with its job folder)."""
    relative = os.path.relpath(target, page_dir)
    return f'<a href="{_e(urllib.parse.quote(relative))}">{_e(text)}</a>'


# ---- sections -------------------------------------------------------------------------------------------------------
def _summary(report: JobReport) -> str:
    r = report.record
    colour = _STATUS_COLOURS.get(r.status, "#59636e")
    plan = r.plan or {}
    shape = (f"{plan.get('instance_count', len(report.hosts))} host(s) × {plan.get('processes_per_host', '?')} "
             f"process(es), {plan.get('strategy', '?')}")
    rows = [("backend", r.backend), ("cluster", shape), ("created at", _when(r.created)), ("ended", _when(r.ended)),
            ("duration", _seconds(r.duration)), ("last phase", r.phase), ("failure reason", r.failure_reason),
            ("model", r.model_data), ("output", r.output_data), ("job folder", str(report.job_dir))]
    table = _table((), [(f"<b>{_e(k)}</b>", _e(v)) for k, v in rows if v])
    return (f'<h1>{_e(report.name)} <span class="status" style="background:{colour}">{_e(r.status)}</span></h1>'
            f'<div class="muted">smdist job report, made {_e(_when(time.time()))}</div>{table}')


def _attempts(report: JobReport) -> str:
    attempts = report.record.attempts
    if not attempts:
        return ""
    rows = []
    for a in attempts:
        steps = ", ".join(f"{k}: {v}" for k, v in (a.get("first_steps") or {}).items())
        # when its ranks began (its hosts' start when they never ran), and the step they resumed at when one is known
        began = a.get(Phase.RUNNING) or a.get("started")
        when = "-" if began is None else f"{_when(began)} (+{_seconds(began - report.record.created)})"
        rows.append([_e(a.get("attempt")), _e(a.get("cause")), _e(a.get("reason") or ""),
                     _e(a.get("decision")) + (f"<div class='muted'>{_e(a['why'])}</div>" if a.get("why") else ""),
                     _e(when) + (f"<div class='muted'>step {_e(steps)}</div>" if steps else ""),
                     _e(a.get("warning") or "")])
    return "<h2>Attempts</h2>" + _table(("attempt", "cause", "reason", "decision", "began at", "warning"), rows)


def _timeline(report: JobReport) -> str:
    """The job's phases on one lane, each host's working time on its own (to its failure or last rank exit), rank
    exits as ticks."""
    r = report.record
    times = [t for span in r.phases.values() for t in span if t is not None]
    times += [t for h in report.hosts for t in [h.ended, *(e.time for e in h.rank_exits)] if t is not None]
    start = r.created
    end = max([r.ended or 0.0, *times]) or time.time()
    span = max(end - start, 1e-3)

    def left(t: float) -> float:
        return max(0.0, min(100.0, (t - start) / span * 100))

    phases = []
    # in time order (job.json keeps them by name): a later phase drawn over an earlier one would hide its label
    for name, (p0, p1) in sorted(r.phases.items(), key=lambda item: (item[1][0] is None, item[1][0] or 0.0)):
        if p0 is None or name == Phase.DONE:
            continue
        a, b = left(p0), left(p1 if p1 is not None else end)
        phases.append(f'<div class="seg" title="{_e(name)}: {_e(_seconds((p1 or end) - p0))}" style="left:{a:.2f}%;'
                      f'width:{max(b - a, 0.3):.2f}%;background:{_PHASE_COLOURS.get(name, "#d0d7de")}">'
                      f'{_e(name) if b - a > 8 else ""}</div>')  # a short phase: its name in the tooltip only
    rows = [["job", f'<div class="lane">{"".join(phases)}</div>']]
    running = (r.phases.get(Phase.RUNNING) or r.phases.get(Phase.STARTING) or [start, None])[0] or start
    for h in report.hosts:
        stop = h.ended or (r.phases.get(Phase.RUNNING) or [None, None])[1] or end
        ok = h.exit_code == 0 or (h.exit_code is None and not h.failure)
        colour = "#4ac26b" if ok else ("#ffb77c" if (h.failure or {}).get("likely_victim") else "#ff8182")
        a, b = left(running), left(stop)
        bar = (f'<div class="seg" style="left:{a:.2f}%;width:{max(b - a, 0.3):.2f}%;background:{colour}" '
               f'title="{_e(h.name)}: {_e(_seconds(stop - running))}"></div>')
        ticks = "".join(f'<div class="tick" style="left:{left(e.time):.2f}%" title="rank {_e(e.rank)} exited '
                        f'{_e(e.code)} at +{_e(_seconds(e.time - start))}"></div>' for e in h.rank_exits)
        rows.append([_e(h.name), f'<div class="lane">{bar}{ticks}</div>'])
    legend = " ".join(f'<span class="seg-key" style="background:{c}">{_e(n)}</span>'
                      for n, c in _PHASE_COLOURS.items() if n in r.phases and n != Phase.DONE)
    scale = (f'<div class="muted">0 s … {_e(_seconds(span))} after the job was created. Phases: {legend}. Hosts: '
             "from the start of their training to their failure or last rank's exit; ticks: a rank's exit()</div>")
    return "<h2>Timeline</h2>" + _table(("", "time"), rows, css="timeline") + scale


def _hosts(report: JobReport, page_dir: Path) -> str:
    first = first_failing_host(report)
    rows, classes = [], []
    for h in report.hosts:
        f = h.failure or {}
        reported = ""
        if f:
            reported = _e(f"{_rank(f.get('rank'))}exit code {f.get('exit_code')}"
                          + (f" ({f['signal']})" if f.get("signal") else "")
                          + (" — likely a victim of another rank's failure" if f.get("likely_victim") else ""))
        exits = ", ".join(f"rank {e.rank} (pid {e.pid}): {e.code}" for e in h.rank_exits)
        detail = ", ".join(f"{k} {v}" for k, v in h.detail.items())
        rows.append([_e(h.name), _e("-" if h.exit_code is None else h.exit_code), reported, _e(exits), _e(detail),
                     _link(h.log_file, page_dir, f"logs/{h.log_file.name}")])
        classes.append("first" if h.name == first else "")
    return "<h2>Hosts</h2>" + _table(("host", "exit code", "its runtime reported", "rank exits (exit())", "detail",
                                      "log"), rows, classes)


def _rank(rank: Any, before: str = "") -> str:
    """`rank 3: ` (or `, rank 3`), nothing for a host-level record."""
    if rank is None:
        return ""
    return f"{before}rank {rank}" if before else f"rank {rank}: "


def _traceback(failure: dict[str, Any]) -> str:
    lines = failure.get("traceback") or []
    hint = f"<div>hint: {_e(failure['hint'])}</div>" if failure.get("hint") else ""
    return (f"<pre>{_e(chr(10).join(lines))}</pre>" if lines else "<div class='muted'>(no traceback)</div>") + hint


def _failure(report: JobReport) -> str:
    parts = []
    if report.diagnosis:
        parts.append(f"<pre>{_e(report.diagnosis)}</pre>")
    first = first_failing_host(report) if report.diagnosis else None  # its traceback is in the diagnosis
    for h in report.hosts:
        if h.failure and h.failure.get("traceback") and h.name != first:
            parts.append(f"<h3>{_e(h.name)}{_e(_rank(h.failure.get('rank'), ', '))}</h3>{_traceback(h.failure)}")
    dumps = [(h, d) for h in report.hosts for d in h.dumps]
    if dumps:
        parts.append("<h3>Stack dumps (where each rank was when it was asked)</h3>")
        parts += [f"<div>{_e(h.name)}, rank {_e(d.rank)} (pid {_e(d.pid)})</div><pre>{_e(chr(10).join(d.lines))}</pre>"
                  for h, d in dumps]
    for attempt, failures in sorted(report.earlier_failures.items()):
        parts.append(f"<h3>Attempt {_e(attempt)}: what its hosts wrote (its cause is in Attempts)</h3>")
        parts += [f"<div>{_e(f.get('host'))}{_e(_rank(f.get('rank'), ', '))}: exit code {_e(f.get('exit_code'))}"
                  f"{_e(' (' + str(f['signal']) + ')') if f.get('signal') else ''}</div>" + _traceback(f)
                  for f in failures]
    return "<h2>Failure</h2>" + "".join(parts) if parts else ""


def _metrics(report: JobReport, plots: list[Plot] | str) -> str:
    if not report.metrics.count:
        return ("<h2>Metrics</h2><div class='muted'>no metrics recorded (metric_definitions parse the ranks' output; "
                "system metrics are sampled while the hosts run)</div>")
    rows = [[_e(s.name), _e(s.kind), _e(s.host if s.rank is None else f"{s.host} r{s.rank}"), _e(f"{s.last:.6g}"),
             _e(f"{s.min:.6g}"), _e(f"{s.max:.6g}"), _e(s.count)] for s in report.metrics.summaries()]
    table = _table(("metric", "kind", "where", "last", "min", "max", "points"), rows)
    if report.metrics.thinned:
        table += (f"<div class='muted'>plots show up to {2 * report.metrics.keep} evenly spaced points of each "
                  "series, its last included; the table counts every point</div>")
    if isinstance(plots, str):
        images = f"<div class='muted'>no plots: {_e(plots)}</div>"
    else:
        images = "".join(f'<img class="plot" alt="{_e(p.title)}" '
                         f'src="data:image/png;base64,{base64.b64encode(p.png).decode()}">' for p in plots)
    return f"<h2>Metrics</h2>{table}{images}"


def _logs(report: JobReport, page_dir: Path) -> str:
    parts = [f"<h3>{_link(h.log_file, page_dir, h.name)}</h3><pre>{_e(chr(10).join(h.log_tail)) or '(empty)'}</pre>"
             for h in report.hosts]
    return "<h2>End of each host's log</h2>" + "".join(parts)


def render_page(report: JobReport, page_dir: Path, plots: list[Plot] | str) -> str:
    """The page; links are relative to `page_dir`, the folder the page is written to."""
    body = "".join([_summary(report), _attempts(report), _failure(report), _hosts(report, page_dir),
                    _timeline(report), _metrics(report, plots), _logs(report, page_dir)])
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{_e(report.name)}: {_e(report.record.status)}</title><style>{_STYLE}</style></head>"
            f"<body>{body}</body></html>\n")


def write_report(job_dir: Path, output: Path | None = None) -> Path:
    """Write the report of the job in `job_dir` to `output` (default <job folder>/report.html); returns its path."""
    from .job_report import read_report

    report = read_report(job_dir.absolute())
    out = (output or job_dir / "report.html").absolute()
    page = render_page(report, out.parent,
                       metric_plots(report.metrics.plotted_points()) if report.metrics.count else [])
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)  # a reader (a browser reloading it) never sees half a page
    return out
