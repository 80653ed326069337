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


def test_a_digest_summarizes_exactly_and_keeps_a_bounded_even_sample() -> None:
    """Digest (the report, `smdist metrics`): every point counted in the summaries, as summarize counts them, while a
    series keeps at most 2 x keep points for its plot, evenly spaced, its first and last among them."""
    from smdist_launcher.metrics.summary import Digest

    points = [MetricPoint("loss", float((i * 37) % 1001), 1.7e9 + i, "algo-1", 0, step=i) for i in range(100_003)]
    points += [MetricPoint("CPUUtilization", 5.0, 1.7e9 + i, "algo-1", kind=SYSTEM) for i in range(10)]
    points.sort(key=lambda p: p.timestamp)
    digest = Digest(points, keep=64)
    assert digest.summaries() == summarize(points)
    assert digest.count == len(points) and digest.thinned
    loss = [p for p in digest.plotted_points() if p.name == "loss"]
    assert len(loss) <= 2 * 64 + 1
    assert loss[0].step == 0 and loss[-1].step == 100_002
    gaps = {b.step - a.step for a, b in zip(loss[:-2], loss[1:-1], strict=True)}  # type: ignore[operator]
    assert len(gaps) == 1  # one stride: evenly spaced
    assert [p.value for p in digest.plotted_points() if p.kind == SYSTEM] == [5.0] * 10  # a short series whole
