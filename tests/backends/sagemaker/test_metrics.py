"""A SageMaker job's metrics read from CloudWatch (moto's), as SageMaker publishes them: namespace
/aws/sagemaker/TrainingJobs, dimension TrainingJobName."""
from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker.metrics import NAMESPACE, read_cloudwatch
from smdist_launcher.cli.main import main

from .aws_env import use_moto


def _publish(job_name: str, name: str, values: list[float], start: dt.datetime) -> None:
    cloudwatch = boto3.client("cloudwatch")
    cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=[
        {"MetricName": name, "Dimensions": [{"Name": "TrainingJobName", "Value": job_name}],
         "Timestamp": start + dt.timedelta(minutes=i), "Value": v} for i, v in enumerate(values)])


def test_each_metric_of_the_job_is_read_one_point_per_minute(moto_endpoint: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    use_moto(monkeypatch, moto_endpoint)
    start = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0) - dt.timedelta(minutes=10)
    _publish("cw-job", "train:loss", [3.0, 2.0, 1.0], start)
    _publish("cw-job", "val:acc", [0.5], start)
    _publish("another-job", "train:loss", [9.0], start)
    points = read_cloudwatch(boto3.client("cloudwatch"), "cw-job", start - dt.timedelta(minutes=1),
                             start + dt.timedelta(minutes=5))
    assert [(p.name, p.value) for p in points] == [("train:loss", 3.0), ("train:loss", 2.0), ("train:loss", 1.0),
                                                   ("val:acc", 0.5)]
    assert [p.timestamp for p in points[:3]] == [(start + dt.timedelta(minutes=i)).timestamp() for i in range(3)]


def test_smdist_metrics_reads_a_sagemaker_job_from_cloudwatch(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                              kwargs: dict[str, Any], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    use_moto(monkeypatch, moto_endpoint)
    job_name = f"pt-metrics-{time.monotonic_ns() % 10**12}"
    PyTorch(**kwargs).fit("s3://data-bucket/train", job_name=job_name, wait=False)
    # inside the job's window: from its creation (a minute of slack) to now
    _publish(job_name, "train:loss", [0.75, 0.5], dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=20))
    capsys.readouterr()
    assert main(["metrics", job_name, "--format", "json", "--jobs-dir", str(tmp_path / "jobs")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["name"], [p["value"] for p in s["points"]]) for s in out["series"]] == [("train:loss", [0.75, 0.5])]
