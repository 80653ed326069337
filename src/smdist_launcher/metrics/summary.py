"""What `smdist metrics`, the report and serve's FinalMetricDataList show of a job's points: per series (a metric on
one host/rank) its last, min, max and count; per training metric its last value."""
from __future__ import annotations

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


def series(points: Iterable[MetricPoint]) -> dict[SeriesKey, list[MetricPoint]]:
    """The points of each (kind, name, host, rank), oldest first, in the order the series first appeared."""
    out: dict[SeriesKey, list[MetricPoint]] = {}
    for p in sorted(points, key=lambda p: p.timestamp):
        out.setdefault((p.kind, p.name, p.host, p.rank), []).append(p)
    return out


def _summary(name: str, kind: str, host: str, rank: int | None, pts: list[MetricPoint]) -> MetricSummary:
    values = [p.value for p in pts]
    steps = [p.step for p in pts if p.step is not None]
    return MetricSummary(name=name, kind=kind, host=host, rank=rank, last=values[-1], min=min(values),
                         max=max(values), count=len(values), first_timestamp=pts[0].timestamp,
                         last_timestamp=pts[-1].timestamp, last_step=steps[-1] if steps else None)


def summarize(points: Iterable[MetricPoint]) -> list[MetricSummary]:
    """One summary per metric, split per host/rank when its points come from more than one; training metrics
    first, then system metrics, each in order of first appearance."""
    by_series = series(points)
    by_metric: dict[tuple[str, str], list[SeriesKey]] = {}
    for key in by_series:
        by_metric.setdefault((key[0], key[1]), []).append(key)
    out = []
    for (kind, name), keys in sorted(by_metric.items(), key=lambda kv: kv[0][0] != TRAINING):
        for key in sorted(keys, key=lambda k: (k[2] or "", -1 if k[3] is None else k[3])):
            out.append(_summary(name, kind, key[2], key[3], by_series[key]))
    return out


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
