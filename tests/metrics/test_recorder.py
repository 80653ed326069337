from __future__ import annotations

from pathlib import Path

from smdist_launcher.metrics.definitions import MAX_TIMEOUTS
from smdist_launcher.metrics.recorder import MetricsRecorder
from smdist_launcher.metrics.store import read_points

LOSS = [{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}]


def test_rank_lines_become_points_with_the_rank_and_its_last_step(tmp_path: Path) -> None:
    store = tmp_path / "metrics.jsonl"
    rec = MetricsRecorder(store, LOSS, step_patterns=[r"step (\d+)", "no group here"])
    rec.line("algo-1", 0, "step 4 loss: 0.5")
    rec.line("algo-2", 3, "loss: 0.75")               # no step seen yet on this rank
    rec.line("algo-1", 0, "validating")
    rec.line("algo-1", 0, "loss: 0.25")               # the rank's last step (4) still applies
    rec.line("algo-1", None, "runtime chatter")
    rec.close()
    points = read_points(tmp_path)
    assert [(p.host, p.rank, p.step, p.value) for p in points] == [("algo-1", 0, 4, 0.5), ("algo-2", 3, None, 0.75),
                                                                    ("algo-1", 0, 4, 0.25)]


def test_progress_names_the_first_metric_and_the_step(tmp_path: Path) -> None:
    calls = []
    rec = MetricsRecorder(tmp_path / "m.jsonl", LOSS, step_patterns=[r"step (\d+)"],
                          on_progress=lambda: calls.append(1))
    assert rec.progress() == ""
    rec.line("algo-2", 2, "step 7 loss: 0.125")
    rec.close()
    assert rec.progress() == "train:loss 0.125 (algo-2 r2), step 7"
    assert calls == [1]  # the status line is told (at most once a second)


def test_without_definitions_nothing_is_written(tmp_path: Path) -> None:
    rec = MetricsRecorder(tmp_path / "metrics.jsonl")
    rec.line("algo-1", 0, "loss: 1.0")
    rec.close()
    assert read_points(tmp_path) == []


def test_a_disabled_metric_is_noted_once(tmp_path) -> None:
    notes: list[str] = []
    rec = MetricsRecorder(tmp_path / "m.jsonl", [{"Name": "redos", "Regex": r"(a|aa)+$"}], on_note=notes.append)
    for _ in range(MAX_TIMEOUTS + 2):  # disabled at the MAX_TIMEOUTS-th, noted once
        rec.line("algo-1", 0, "a" * 60 + "!")
    rec.close()
    assert len(notes) == 1 and "metric 'redos' disabled" in notes[0], notes
