"""A SageMaker job's training metrics from CloudWatch, where SageMaker publishes what its metric_definitions parse:
namespace /aws/sagemaker/TrainingJobs, dimension TrainingJobName. The same reads as the SDK's TrainingJobAnalytics
(ListMetrics, then GetMetricStatistics per metric), so `smdist serve` answering them serves this reader too."""
from __future__ import annotations

import datetime as dt
from typing import Any

from ...metrics.store import TRAINING, MetricPoint

NAMESPACE = "/aws/sagemaker/TrainingJobs"
JOB_DIMENSION = "TrainingJobName"
PERIOD_S = 60                  # what TrainingJobAnalytics asks for: SageMaker publishes at most once a minute
MAX_DATAPOINTS = 1440          # GetMetricStatistics' limit per call: split longer windows


def metric_names(cloudwatch: Any, job_name: str) -> list[str]:
    names: list[str] = []
    kwargs: dict[str, Any] = {"Namespace": NAMESPACE, "Dimensions": [{"Name": JOB_DIMENSION, "Value": job_name}]}
    while True:
        page = cloudwatch.list_metrics(**kwargs)
        for metric in page.get("Metrics", []):
            if metric["MetricName"] not in names:
                names.append(metric["MetricName"])
        if not page.get("NextToken"):
            return names
        kwargs["NextToken"] = page["NextToken"]


def _windows(start: dt.datetime, end: dt.datetime, period_s: int) -> list[tuple[dt.datetime, dt.datetime]]:
    step = dt.timedelta(seconds=period_s * MAX_DATAPOINTS)
    out = []
    while start < end:
        out.append((start, min(end, start + step)))
        start += step
    return out


def read_cloudwatch(cloudwatch: Any, job_name: str, start: dt.datetime, end: dt.datetime, *,
                    period_s: int = PERIOD_S) -> list[MetricPoint]:
    """Every training metric of the job between start and end, one point per period (its average), oldest first.
    Host is "all": CloudWatch keeps a training metric per job, not per host or rank."""
    points: list[MetricPoint] = []
    for name in metric_names(cloudwatch, job_name):
        for lo, hi in _windows(start, end, period_s):
            answer = cloudwatch.get_metric_statistics(
                Namespace=NAMESPACE, MetricName=name, Dimensions=[{"Name": JOB_DIMENSION, "Value": job_name}],
                StartTime=lo, EndTime=hi, Period=period_s, Statistics=["Average"])
            for d in answer.get("Datapoints", []):
                points.append(MetricPoint(name, float(d["Average"]), d["Timestamp"].timestamp(), "all", kind=TRAINING))
    points.sort(key=lambda p: (p.name, p.timestamp))
    return points


def job_window(sagemaker: Any, job_name: str, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime]:
    """The job's training time as DescribeTrainingJob gives it (start to end, or to now while it runs)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    described = sagemaker.describe_training_job(TrainingJobName=job_name)
    start = described.get("TrainingStartTime") or described.get("CreationTime") or now - dt.timedelta(days=1)
    end = described.get("TrainingEndTime") or now
    return start - dt.timedelta(minutes=1), end + dt.timedelta(minutes=1)
