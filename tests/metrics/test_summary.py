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


def _same_summaries(a: list, b: list) -> bool:
    """Equal field by field as the table prints them: a NaN equal to a NaN, 0.0 not equal to -0.0."""
    def norm(s: object) -> tuple:
        return tuple(repr(v) if isinstance(v, float) else v for v in s.to_dict().values())  # type: ignore[attr-defined]
    return [norm(s) for s in a] == [norm(s) for s in b]


def test_a_digest_of_points_out_of_time_order_summarizes_as_summarize_does() -> None:
    """The report and `smdist metrics` digest iter_points, which puts a file in time order only within a window of
    neighbours: after a clock stepped back (NTP) a series' points come out of order. Its first/last/step must still
    be those of the earliest/latest timestamp, as summarize (every point sorted) and final_metrics give them; so must
    the order of the series. Before, a Digest took them in arrival order."""
    import random

    from smdist_launcher.metrics.summary import Digest

    values = [1.0, -2.0, 0.0, -0.0, float("nan"), float("inf"), float("-inf")]
    for seed in range(400):
        rnd = random.Random(seed)
        points = [MetricPoint(rnd.choice(["loss", "acc"]), rnd.choice(values), float(rnd.randint(0, 6)),
                              rnd.choice(["algo-1", "algo-2"]), rnd.choice([None, 0, 1]),
                              step=rnd.choice([None, rnd.randint(0, 9)]), kind=rnd.choice(["training", SYSTEM]))
                  for _ in range(rnd.randint(1, 40))]
        digest = Digest(points, keep=2)
        assert _same_summaries(digest.summaries(), summarize(points)), (seed, points)
        assert digest.count == len(points)
    # a rank's step 6 stamped 10 s before its step 5 (the clock stepped back between them): the latest timestamp wins
    late = [_p("loss", 5.0, 1000.0, step=5), _p("loss", 6.0, 990.0, step=6)]
    assert Digest(late).summaries() == summarize(late)
    assert (Digest(late).summaries()[0].last, final_metrics(late)["loss"]) == (5.0, 5.0)


def test_the_digest_of_a_store_whose_clock_stepped_back_matches_its_final_metrics(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A store as a job writes it: a loss point, then more than iter_points' reorder window of system samples, then
    the clock steps back 10 s and the next loss points are stamped earlier. The report's table (a Digest of
    iter_points) must say what summarize of every point says, and its last loss must be the job's final metric."""
    from smdist_launcher.metrics.store import REORDER_WINDOW, STORE_FILE, MetricWriter, iter_points, read_points
    from smdist_launcher.metrics.summary import Digest

    writer = MetricWriter(tmp_path / STORE_FILE)
    writer.write(_p("loss", 5.0, 1000.0, step=5))
    for i in range(REORDER_WINDOW + 10):
        writer.write(_p("CPUUtilization", float(i), 1000.0 + (i + 1) / 1000, rank=None, kind=SYSTEM))
    writer.write(_p("loss", 6.0, 990.0, step=6))
    writer.write(_p("loss", 7.0, 990.5, step=7))
    writer.close()
    digest = Digest(iter_points(tmp_path))
    assert _same_summaries(digest.summaries(), summarize(read_points(tmp_path)))
    loss = digest.summaries()[0]
    assert (loss.last, loss.last_step, loss.first_timestamp) == (final_metrics(read_points(tmp_path))["loss"], 5, 990.0)
    assert sorted(p.value for p in digest.plotted_points() if p.name == "loss") == [5.0, 6.0, 7.0]


def test_read_points_is_oldest_first_even_where_iter_points_is_not(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """read_points held every point and sorted them; made list(iter_points), it kept iter_points' order, which is in
    time only within a window of neighbours: after a clock step back its list was out of order. A list is held
    anyway, so it is sorted (a nearly sorted list sorts in one pass)."""
    from smdist_launcher.metrics.store import REORDER_WINDOW, STORE_FILE, MetricWriter, read_points

    writer = MetricWriter(tmp_path / STORE_FILE)
    for i in range(REORDER_WINDOW + 10):
        writer.write(_p("loss", float(i), 1000.0 + i / 1000))
    writer.write(_p("loss", -1.0, 990.0))  # the clock stepped back 10 s
    writer.close()
    stamps = [p.timestamp for p in read_points(tmp_path)]
    assert stamps == sorted(stamps) and len(stamps) == REORDER_WINDOW + 11
