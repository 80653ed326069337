"""backends/toolkit/report_page.py: the timeline draws the job's phases in time order (job.json keeps them by name,
and a later-drawn phase cut the label of the one under it: "unning"), and every attempt says when it began."""
from __future__ import annotations

import re
from pathlib import Path

from cli.test_report import failed_job
from smdist_launcher.backends.toolkit.records import JobRecord
from smdist_launcher.backends.toolkit.report_page import write_report


def _job_lane(page: str) -> list[tuple[float, float, str]]:
    lane = page[page.index("<h2>Timeline</h2>"):]
    lane = lane[:lane.index("</tr>", lane.index('<div class="lane">'))]
    return [(float(a), float(w), label) for a, w, label in
            re.findall(r'class="seg"[^>]*style="left:([\d.]+)%;width:([\d.]+)%;[^"]*">([^<]*)</div>', lane)]


def test_phases_are_drawn_in_time_order_and_labels_are_not_covered(tmp_path: Path) -> None:
    job = failed_job(tmp_path / "jobs")
    record = JobRecord.load(job.record_file)
    t0 = record.created
    # a short starting phase (drawn at its minimum width) right before a long running one
    record.phases = {"created": [t0, t0 + 1], "staging": [t0 + 1, t0 + 3], "starting": [t0 + 3, t0 + 3.05],
                     "running": [t0 + 3.05, t0 + 60], "uploading": [t0 + 60, t0 + 62]}
    record.save(job.record_file)
    segs = _job_lane(write_report(job.root).read_text())
    assert [label for _, _, label in segs if label] == ["running"]
    lefts = [left for left, _, _ in segs]
    assert lefts == sorted(lefts)
    for i, (left, width, label) in enumerate(segs):
        if label:  # nothing drawn after a labelled bar starts inside it
            assert all(later >= left + width - 0.31 for later, _, _ in segs[i + 1:]), segs


def test_every_attempt_says_when_it_began(tmp_path: Path) -> None:
    job = failed_job(tmp_path / "jobs")
    record = JobRecord.load(job.record_file)
    t0 = record.created
    record.attempts[0].update(started=t0 + 1, running=None, first_steps={})  # its hosts never ran a rank
    record.attempts[1].update(started=t0 + 20, running=t0 + 24.5)
    record.save(job.record_file)
    page = write_report(job.root).read_text()
    table = page[page.index("<h2>Attempts</h2>"):page.index("</table>", page.index("<h2>Attempts</h2>"))]
    began = [re.findall(r"<td>(.*?)</td>", row)[4] for row in table.split("<tr>")[2:]]
    assert "(+1.0 s)" in began[0] and "step" not in began[0]
    assert "(+24.5 s)" in began[1] and "step 0: 4, 1: 4" in began[1]


def test_the_report_of_a_big_store_holds_a_sample_not_the_store(tmp_path: Path) -> None:
    """A multi-day job's metrics store holds millions of points: the report reads it once, keeping each series'
    summary and a bounded sample for its plot (before, every point was held as an object: several times the
    file's size). The table still counts every point."""
    import tracemalloc

    from smdist_launcher.backends.toolkit.report_page import metric_plots
    from smdist_launcher.metrics.store import STORE_FILE, MetricPoint

    job = failed_job(tmp_path / "jobs")
    write_report(job.root)  # the modules a report imports, not counted
    metric_plots([MetricPoint("warm", 1.0, 1.0, "algo-1", 0)])  # nor matplotlib's first figure
    n = 150_000
    with open(job.root / STORE_FILE, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(MetricPoint("loss", 1.0 / (1 + i), 1.7e9 + i / 10, f"algo-{1 + i % 2}", i % 2, step=i).to_json())
            f.write("\n")
    size = (job.root / STORE_FILE).stat().st_size
    tracemalloc.start()
    try:
        page = write_report(job.root).read_text()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    counts = [int(c) for c in re.findall(r"<td>loss</td><td>training</td><td>algo-\d r\d</td>(?:<td>[^<]*</td>){3}"
                                         r"<td>(\d+)</td>", page)]
    assert counts == [n // 2, n // 2], counts
    assert "evenly spaced points" in page
    assert peak < size / 2, (peak, size)
