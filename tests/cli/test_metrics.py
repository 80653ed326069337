from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

from smdist_launcher.cli.main import main
from smdist_launcher.metrics.store import STORE_FILE, SYSTEM, MetricPoint, MetricWriter

from .jobfolders import make_job


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    root = tmp_path / "jobs"
    job = make_job(root, "metered")
    writer = MetricWriter(job.root / STORE_FILE)
    for step, t in enumerate((10.0, 11.0, 12.0)):
        writer.write(MetricPoint("train:loss", 1.0 / (step + 1), t, "algo-1", rank=0, step=step))
        writer.write(MetricPoint("train:loss", 2.0 / (step + 1), t + 0.1, "algo-2", rank=1, step=step))
    writer.write(MetricPoint("CPUUtilization", 150.0, 10.5, "algo-1", kind=SYSTEM))
    writer.close()
    make_job(root, "quiet")
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["metrics", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_table_has_a_row_per_host_and_rank(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "metered", "--jobs-dir", str(jobs))
    assert code == 0
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["metric", "kind", "host", "rank", "last", "min", "max", "count", "step"]
    assert rows[1] == ["train:loss", "training", "algo-1", "0", "0.333333", "0.333333", "1", "3", "2"]
    assert rows[2][:4] == ["train:loss", "training", "algo-2", "1"] and rows[3][:3] == ["CPUUtilization", "system",
                                                                                          "algo-1"]


def test_json_holds_every_point_of_every_series(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "met", "--jobs-dir", str(jobs), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["job"] == "metered"
    loss = [s for s in data["series"] if s["name"] == "train:loss"]
    assert [(s["host"], s["rank"], [p["step"] for p in s["points"]]) for s in loss] == [
        ("algo-1", 0, [0, 1, 2]), ("algo-2", 1, [0, 1, 2])]
    assert {s["name"] for s in data["summary"]} == {"train:loss", "CPUUtilization"}


def test_csv_is_one_row_per_point(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "metered", "--jobs-dir", str(jobs), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 7
    assert rows[0] == {"name": "train:loss", "kind": "training", "host": "algo-1", "rank": "0", "step": "0",
                       "timestamp": "10.000", "value": "1.0"}


def test_a_job_without_metrics_says_so(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "quiet", "--jobs-dir", str(jobs))
    assert code == 0 and "no metrics recorded" in out


def test_plot_by_step_writes_a_png(jobs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "loss.png"
    code, _, err = _run(capsys, "metered", "--jobs-dir", str(jobs), "--plot", str(png), "--x", "step")
    assert code == 0 and "2 panels" in err
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plot_without_matplotlib_says_what_to_install(jobs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    code, _, err = _run(capsys, "metered", "--jobs-dir", str(jobs), "--plot", str(tmp_path / "x.png"))
    assert code == 2 and "pip install 'smdist-launcher[plot]'" in err
    assert not (tmp_path / "x.png").exists()


def test_the_table_of_a_store_whose_clock_stepped_back_shows_the_latest_point(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    """The table is a Digest of iter_points, in time order only within a window of neighbours. A loss point, more
    than that window of system samples, then the clock steps back 10 s: steps 6 and 7 come stamped before step 5.
    The table's last and step are those of the latest timestamp, as the old table (every point sorted) and the
    job's final metrics say; before, it showed the last to arrive (7, step 7)."""
    from smdist_launcher.metrics.store import REORDER_WINDOW

    root = tmp_path / "jobs"
    job = make_job(root, "stepped")
    writer = MetricWriter(job.root / STORE_FILE)
    writer.write(MetricPoint("loss", 5.0, 1000.0, "algo-1", rank=0, step=5))
    for i in range(REORDER_WINDOW + 10):
        writer.write(MetricPoint("CPUUtilization", 1.0, 1000.0 + (i + 1) / 1000, "algo-1", kind=SYSTEM))
    writer.write(MetricPoint("loss", 6.0, 990.0, "algo-1", rank=0, step=6))
    writer.write(MetricPoint("loss", 7.0, 990.5, "algo-1", rank=0, step=7))
    writer.close()
    code, out, _ = _run(capsys, "stepped", "--jobs-dir", str(root))
    rows = [line.split() for line in out.splitlines()]
    assert code == 0 and rows[1] == ["loss", "training", "algo-1", "0", "5", "5", "7", "3", "5"], rows
