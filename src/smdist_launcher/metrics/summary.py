"""What `smdist metrics`, the report and serve's FinalMetricDataList show of a job's points: per series (a metric on
one host/rank) its last, min, max and count; per training metric its last value."""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .store import TRAINING, MetricPoint

SeriesKey = tuple[str, str, str, int | None]  # (kind, name, host, rank)


@dataclass(frozen=True)
class MetricSummary:
    name: str
    kind: str
    host: str

    rank: int | None
    last: float
    min: float
    max: float
    count: int
    first_timestamp: float
    last_timestamp: float
    last_step: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "kind": self.kind, "host": self.host, "rank": self.rank, "last": self.last,
                "min": self.min, "max": self.max, "count": self.count, "first_timestamp": self.first_timestamp,
                "last_timestamp": self.last_timestamp, "last_step": self.last_step}


# Points of one series a plot keeps at most (2x this before thinning): a multi-day job's store holds millions.
PLOT_POINTS = 2048


def series(points: Iterable[MetricPoint]) -> dict[SeriesKey, list[MetricPoint]]:
    """The points of each (kind, name, host, rank), oldest first, in the order the series first appeared."""
    out: dict[SeriesKey, list[MetricPoint]] = {}
    for p in sorted(points, key=lambda p: p.timestamp):
        out.setdefault((p.kind, p.name, p.host, p.rank), []).append(p)
    return out


class _Series:
    """One series' running summary and an evenly thinned sample of its points (every `stride`-th in arrival order).

    The summary does not depend on the order points come in: iter_points orders a file only within a window of
    neighbours (a clock stepped back leaves a series out of order), and the summary must still be summarize's of the
    points sorted by time (first/last/step of the earliest/latest timestamp, a tie to the later point, as
    final_metrics; min/max NaN when the earliest value is, as min()/max() of the sorted values)."""

    def __init__(self, first: MetricPoint, seq: int) -> None:
        self.first, self.first_seq = first, seq  # the earliest (timestamp, arrival)
        self.last = first                        # the latest (timestamp, arrival): a tie goes to the later point
        self.arrived = first                     # the last to arrive (the sample's end)
        self.min, self.max = math.inf, -math.inf  # over the values that are not NaN, of the earliest point on a tie
        self.min_at = self.max_at = math.inf      # (0.0 and -0.0 are equal, and print apart)
        self.count = 0
        self.last_step: int | None = None
        self.last_step_at = -math.inf
        self.sample: list[MetricPoint] = []
        self.stride = 1

    def add(self, p: MetricPoint, keep: int, seq: int) -> None:
        if self.count % self.stride == 0:
            self.sample.append(p)
            if len(self.sample) >= 2 * keep:  # thin to every other one: memory stays O(keep) per series
                self.sample = self.sample[::2]
                self.stride *= 2
        self.count += 1
        self.arrived = p
        if p.timestamp < self.first.timestamp:
            self.first, self.first_seq = p, seq
        if p.timestamp >= self.last.timestamp:
            self.last = p
        value = p.value
        if value < self.min or (value == self.min and p.timestamp < self.min_at):
            self.min, self.min_at = value, p.timestamp
        if value > self.max or (value == self.max and p.timestamp < self.max_at):
            self.max, self.max_at = value, p.timestamp
        if p.step is not None and p.timestamp >= self.last_step_at:
            self.last_step, self.last_step_at = p.step, p.timestamp

    def summary(self, key: SeriesKey) -> MetricSummary:
        kind, name, host, rank = key
        nan_first = math.isnan(self.first.value)  # min()/max() of values in time order keep a leading NaN
        return MetricSummary(name=name, kind=kind, host=host, rank=rank, last=self.last.value,
                             min=self.first.value if nan_first else self.min,
                             max=self.first.value if nan_first else self.max, count=self.count,
                             first_timestamp=self.first.timestamp, last_timestamp=self.last.timestamp,
                             last_step=self.last_step)

    def plotted(self) -> list[MetricPoint]:
        return self.sample if self.sample[-1] is self.arrived else [*self.sample, self.arrived]


class Digest:
    """A job's points read once, oldest first, in memory bounded per series: each series' summary (exact) and up
    to about 2 x `keep` of its points, evenly spaced, with its last, for plots (`smdist report`, `smdist metrics`)."""

    def __init__(self, points: Iterable[MetricPoint] = (), keep: int = PLOT_POINTS) -> None:
        self.keep = keep
        self._series: dict[SeriesKey, _Series] = {}
        self._seq = 0  # points added so far: a series' first point is ordered by (timestamp, arrival)
        for p in points:
            self.add(p)

    def add(self, p: MetricPoint) -> None:
        key = (p.kind, p.name, p.host, p.rank)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = _Series(p, self._seq)
        found.add(p, self.keep, self._seq)
        self._seq += 1

    @property
    def count(self) -> int:
        return sum(s.count for s in self._series.values())

    @property
    def thinned(self) -> bool:
        """Some series is plotted from a sample rather than every point."""
        return any(s.stride > 1 for s in self._series.values())

    def summaries(self) -> list[MetricSummary]:
        """One summary per metric, split per host/rank when its points come from more than one; training metrics
        first, then system metrics, each in order of first appearance (in time, whatever order the points came in)."""
        by_metric: dict[tuple[str, str], list[SeriesKey]] = {}
        for key in sorted(self._series, key=lambda k: (self._series[k].first.timestamp, self._series[k].first_seq)):
            by_metric.setdefault((key[0], key[1]), []).append(key)
        out = []
        for (_kind, _name), keys in sorted(by_metric.items(), key=lambda kv: kv[0][0] != TRAINING):
            for key in sorted(keys, key=lambda k: (k[2] or "", -1 if k[3] is None else k[3])):
                out.append(self._series[key].summary(key))
        return out

    def plotted_points(self) -> list[MetricPoint]:
        """The sampled points of every series (each series' own order kept), for plot_points."""
        return [p for s in self._series.values() for p in s.plotted()]


def summarize(points: Iterable[MetricPoint]) -> list[MetricSummary]:
    """The summaries of `points` in any order (Digest.summaries of them sorted by time)."""
    return Digest(sorted(points, key=lambda p: p.timestamp)).summaries()


def latest_training_values(points: Iterable[MetricPoint],
                           last: dict[str, tuple[float, float]] | None = None) -> dict[str, tuple[float, float]]:
    """(timestamp, value) of the latest point of each training metric (any host/rank), ``last`` brought up to date
    with ``points`` when given (a reader that takes a store in pieces)."""
    last = {} if last is None else last
    for p in points:
        if p.kind == TRAINING and (p.name not in last or p.timestamp >= last[p.name][0]):
            last[p.name] = (p.timestamp, p.value)
    return last


def final_metrics(points: Iterable[MetricPoint]) -> dict[str, float]:
    """The last value of each training metric (any host/rank): what SageMaker's FinalMetricDataList holds."""
    return {name: value for name, (_, value) in latest_training_values(points).items()}
