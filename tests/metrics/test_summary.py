from __future__ import annotations

from smdist_launcher.metrics.store import SYSTEM, MetricPoint
from smdist_launcher.metrics.summary import final_metrics, summarize


def _p(name: str, value: float, t: float, host: str = "algo-1", rank: int | None = 0, **kw) -> MetricPoint:
    return MetricPoint(name, value, t, host, rank, **kw)


def test_one_summary_per_host_and_rank_training_metrics_first() -> None:
    points = [_p("CPUUtilization", 50.0, 0.5, rank=None, kind=SYSTEM),
              _p("loss", 3.0, 1.0), _p("loss", 1.0, 2.0), _p("loss", 2.0, 3.0, step=7),
              _p("loss", 5.0, 1.5, host="algo-2", rank=2)]
    out = summarize(points)
    assert [(s.name, s.host, s.rank) for s in out] == [("loss", "algo-1", 0), ("loss", "algo-2", 2),
                                                       ("CPUUtilization", "algo-1", None)]
    first = out[0]
    assert (first.last, first.min, first.max, first.count, first.last_step) == (2.0, 1.0, 3.0, 3, 7)


def test_final_metrics_are_the_last_training_value_of_each_name() -> None:
    points = [_p("loss", 3.0, 1.0), _p("loss", 0.5, 4.0, host="algo-2", rank=3), _p("loss", 1.0, 2.0),
              _p("acc", 0.9, 1.0), _p("CPUUtilization", 80.0, 9.0, rank=None, kind=SYSTEM)]
    assert final_metrics(points) == {"loss": 0.5, "acc": 0.9}


def test_nothing_summarizes_to_nothing() -> None:
    assert summarize([]) == [] and final_metrics([]) == {}
