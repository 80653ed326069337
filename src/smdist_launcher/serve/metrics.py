"""SageMaker's metric reads for served jobs, from each job's metrics store (`<job folder>/metrics.jsonl`):
DescribeTrainingJob's FinalMetricDataList, and the CloudWatch reads the SDK's TrainingJobAnalytics and the console
make (ListMetrics, GetMetricStatistics; GetMetricData of plain metrics).

As SageMaker publishes them: namespace /aws/sagemaker/TrainingJobs; a training metric (metric_definitions) under the
one dimension TrainingJobName=<job>, every host's and rank's values together; a host metric (CPUUtilization, ...)
under Host=<job>/<host>."""
from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..metrics.store import SYSTEM, MetricPoint, file_points, parse_lines, store_files
from ..metrics.summary import latest_training_values
from .jobs import Jobs
from .protocol import ApiError, offset_page

NAMESPACE = "/aws/sagemaker/TrainingJobs"
JOB_DIMENSION = "TrainingJobName"
HOST_DIMENSION = "Host"
LIST_PAGE = 500          # ListMetrics answers at most this many metrics a page, as CloudWatch does
MAX_DATAPOINTS = 1440    # GetMetricStatistics' limit per request
MAX_FINAL_METRICS = 40   # FinalMetricDataList's limit in the API

Dimensions = tuple[tuple[str, str], ...]


def _unit(point: MetricPoint) -> str:
    """CloudWatch's unit of a series: SageMaker's host metrics are percentages; training metrics have none."""
    return "Percent" if point.kind == SYSTEM else "None"


def _dimensions(job: str, point: MetricPoint) -> Dimensions:
    if point.kind == SYSTEM:
        return ((HOST_DIMENSION, f"{job}/{point.host}"),)
    return ((JOB_DIMENSION, job),)


def _job_in(dimensions: Iterable[tuple[str, str | None]]) -> str | None:
    """The job a set of dimensions (or dimension filters) names, if any: only its store needs reading."""
    for key, value in dimensions:
        if value and key == JOB_DIMENSION:
            return value
        if value and key == HOST_DIMENSION:
            return value.split("/", 1)[0]
    return None


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted values."""
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


_SIMPLE = ("SampleCount", "Sum", "Minimum", "Maximum", "Average")


def _percent(statistic: str) -> float:
    """p90 → 90.0; the other extended statistics (trimmed means, ...) are not answered."""
    try:
        value = float(statistic[1:]) if statistic.startswith("p") else -1.0
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise ApiError("InvalidParameterValueException", f"statistic {statistic!r}: smdist serve answers "
                                                         f"{', '.join(_SIMPLE)} and percentiles (p0-p100)")
    return value


def _statistics(values: list[float], wanted: list[str], extended: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    computed = {"SampleCount": float(len(values)), "Sum": float(sum(values)), "Minimum": min(values),
                "Maximum": max(values), "Average": sum(values) / len(values)}
    for name in wanted:
        out[name] = computed[name]
    if extended:
        ordered = sorted(values)
        out["ExtendedStatistics"] = {p: _percentile(ordered, _percent(p)) for p in extended}
    return out


def _epoch(value: Any) -> float:
    """A request timestamp: JSON carries epoch seconds (a datetime when called in-process), or a timestamp string
    (ISO 8601: botocore's validator takes it, and float() of it was a 500)."""
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    if isinstance(value, str):
        from botocore.utils import parse_timestamp

        return float(parse_timestamp(value).timestamp())
    return float(value)


SCAN_BYTES = 2**18   # of a store read at a time for FinalMetricDataList


@dataclass
class _Finals:
    """A job's last value of each training metric, brought up to date by reading only what its store files gained
    since: DescribeTrainingJob (every client's wait() polls it) read the whole store each time, and a job that prints
    a metric line in a loop grows it by gigabytes (a 43 MB store took 250 MB and 10 s a call)."""

    read: dict[Path, int] = field(default_factory=dict)                 # store file → bytes of whole lines read
    last: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric → (its latest timestamp, value)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, job_dir: Path) -> dict[str, tuple[float, float]]:
        with self.lock:
            for path in store_files(job_dir):
                self.read[path] = self._scan(path, self.read.get(path, 0))
            return dict(self.last)

    def _scan(self, path: Path, offset: int) -> int:
        """The whole lines of `path` from `offset` on, SCAN_BYTES at a time; returns where the next read starts (a
        torn last line is read again once whole)."""
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            return offset
        with f:
            if os.fstat(f.fileno()).st_size < offset:  # the file was replaced, not appended to: read it again
                offset = 0
            f.seek(offset)
            while chunk := f.read(SCAN_BYTES):
                end = chunk.rfind(b"\n") + 1
                if end == 0:
                    if len(chunk) < SCAN_BYTES:
                        break            # a line still being written
                    end = len(chunk)     # a line longer than SCAN_BYTES is none a writer of ours makes: skipped
                else:
                    self._take(chunk[:end])
                offset += end
                f.seek(offset)
        return offset

    def _take(self, lines: bytes) -> None:
        latest_training_values(parse_lines(lines.splitlines()), self.last)


def _stream(job_dir: Path) -> Iterator[MetricPoint]:
    """Every point of a job's store files, a line at a time: a chatty job's store reaches gigabytes, and a
    CloudWatch call must not hold it whole (ListMetrics keeps its series, a statistics call its points in range)."""
    for path in store_files(job_dir):
        yield from file_points(path)


class JobMetrics:
    """The metric reads of every job the endpoint runs."""

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._finals: dict[str, _Finals] = {}
        self._finals_lock = threading.Lock()

    def _job_dirs(self) -> dict[str, Path]:
        return {j.name: Path(j.local.job_dir) for j in self._jobs.all() if j.local is not None}

    # ---- DescribeTrainingJob ------------------------------------------------------------------------------------
    def with_final_metrics(self, description: dict[str, Any]) -> dict[str, Any]:
        """The description with FinalMetricDataList: the last value of each metric the request defined (SageMaker
        fills it in for jobs with MetricDefinitions, while they run too)."""
        definitions = (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []
        names = [d["Name"] for d in definitions]
        if not names:
            return description
        job = description["TrainingJobName"]
        job_dir = self._job_dirs().get(job)
        if job_dir is None:
            return description
        with self._finals_lock:
            finals = self._finals.setdefault(job, _Finals())
        last = finals.update(job_dir)
        final = [{"MetricName": n, "Value": last[n][1], "Timestamp": last[n][0]} for n in names if n in last]
        return {**description, "FinalMetricDataList": final[:MAX_FINAL_METRICS]} if final else description

    # ---- CloudWatch ---------------------------------------------------------------------------------------------
    def _metrics(self, job_named: str | None = None) -> Iterable[tuple[str, Dimensions, str]]:
        """(metric name, dimensions, unit) of every metric of every served job (of one, when named: only its store is
        read), in the order they first appear."""
        for job, job_dir in sorted(self._job_dirs().items()):
            if job_named is not None and job != job_named:
                continue
            series: dict[tuple[str, Dimensions], str] = {}
            for p in _stream(job_dir):
                series.setdefault((p.name, _dimensions(job, p)), _unit(p))
            for (name, dims), unit in series.items():
                yield name, dims, unit

    def list_metrics(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("Namespace", NAMESPACE) != NAMESPACE:
            return {"Metrics": []}
        filters = [(f["Name"], f.get("Value")) for f in params.get("Dimensions") or []]
        found = []
        for name, dims, _unit_name in self._metrics(_job_in(filters)):
            if params.get("MetricName") not in (None, name):
                continue
            have = dict(dims)
            if all(key in have and value in (None, have[key]) for key, value in filters):
                found.append({"Namespace": NAMESPACE, "MetricName": name,
                              "Dimensions": [{"Name": k, "Value": v} for k, v in dims]})
        page, following = offset_page(found, params.get("NextToken"), LIST_PAGE,
                                      ApiError("InvalidNextToken", "The service returned an invalid NextToken."))
        out: dict[str, Any] = {"Metrics": page}
        if following is not None:
            out["NextToken"] = following
        return out

    def statistics(self, params: dict[str, Any]) -> dict[str, Any]:
        """GetMetricStatistics: the points of one metric in [StartTime, EndTime), one datapoint per Period (aligned
        to multiples of the period, as CloudWatch's are) with the statistics asked for."""
        wanted, extended = list(params.get("Statistics") or []), list(params.get("ExtendedStatistics") or [])
        if not wanted and not extended:
            raise ApiError("InvalidParameterCombinationException",
                           "Must specify either Statistics or ExtendedStatistics, but not both are empty.")
        start, end, period = _epoch(params["StartTime"]), _epoch(params["EndTime"]), int(params["Period"])
        if end <= start:
            raise ApiError("InvalidParameterValueException", "The parameter StartTime must be less than the "
                                                             "parameter EndTime.")
        requested = math.ceil((end - start) / period)
        if requested > MAX_DATAPOINTS:
            raise ApiError("InvalidParameterCombinationException",
                           f"You have requested up to {requested} datapoints, which exceeds the limit of "
                           f"{MAX_DATAPOINTS}. You may reduce the datapoints requested by increasing Period, or "
                           "decreasing the time range.")
        label = params["MetricName"]
        found = self._metric(params["Namespace"], label, params.get("Dimensions") or [], params.get("Unit"), start,
                             end)
        if found is None:
            return {"Label": label, "Datapoints": []}
        unit, points = found
        return {"Label": label, "Datapoints": [{"Timestamp": at, "Unit": unit, **_statistics(values, wanted, extended)}
                                               for at, values in _buckets(points, start, end, period)]}

    def _metric(self, namespace: str, name: str, dimensions: list[dict[str, str]], unit: str | None,
                start: float, end: float) -> tuple[str, list[MetricPoint]] | None:
        """(unit, points in [start, end)) of the one metric with exactly these dimensions (as CloudWatch matches
        them), or None. One pass over the store, keeping only those points."""
        if namespace != NAMESPACE:
            return None
        asked = tuple(sorted((d["Name"], d["Value"]) for d in dimensions))
        job_named = _job_in(asked)
        for job, job_dir in sorted(self._job_dirs().items()):
            if job_named is not None and job != job_named:
                continue
            have_unit: str | None = None
            points: list[MetricPoint] = []
            for p in _stream(job_dir):
                if p.name != name or tuple(sorted(_dimensions(job, p))) != asked:
                    continue
                have_unit = _unit(p)  # the same for every point of a series: its kind decides it
                if start <= p.timestamp < end:
                    points.append(p)
            if have_unit is not None and unit in (None, have_unit):
                return have_unit, points
        return None

    def metric_data(self, params: dict[str, Any]) -> dict[str, Any]:
        """GetMetricData of MetricStat queries (the SDK's tuning charts and MLflow forwarding ask this way): each
        query's values per period, newest first unless ScanBy=TimestampAscending. Metric math is not answered."""
        start, end = _epoch(params["StartTime"]), _epoch(params["EndTime"])
        ascending = params.get("ScanBy") == "TimestampAscending"
        results = []
        for query in params["MetricDataQueries"]:
            stat = query.get("MetricStat")
            if stat is None:
                raise ApiError("InvalidParameterValueException", f"query {query['Id']}: smdist serve answers "
                                                                 "MetricStat queries only (no Expression)")
            if not query.get("ReturnData", True):
                continue
            metric = stat["Metric"]
            found = self._metric(metric.get("Namespace", ""), metric.get("MetricName", ""),
                                 metric.get("Dimensions") or [], stat.get("Unit"), start, end)
            name = stat["Stat"]
            simple, extended = ([name], []) if name in _SIMPLE else ([], [name])
            rows = []
            for at, values in _buckets(found[1] if found else [], start, end, int(stat["Period"])):
                computed = _statistics(values, simple, extended)
                rows.append((at, computed[name] if simple else computed["ExtendedStatistics"][name]))
            rows.sort(reverse=not ascending)
            results.append({"Id": query["Id"], "Label": query.get("Label") or metric.get("MetricName"),
                            "Timestamps": [t for t, _ in rows], "Values": [v for _, v in rows],
                            "StatusCode": "Complete"})
        return {"MetricDataResults": results, "Messages": []}


def _buckets(points: list[MetricPoint], start: float, end: float, period: int) -> list[tuple[float, list[float]]]:
    """The values in [start, end) by period (aligned to multiples of it, as CloudWatch's datapoints are)."""
    buckets: dict[float, list[float]] = {}
    for p in points:
        if start <= p.timestamp < end:
            buckets.setdefault(p.timestamp // period * period, []).append(p.value)
    return sorted(buckets.items())
