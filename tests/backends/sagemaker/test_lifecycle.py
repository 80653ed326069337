"""The job lifecycle against a real moto server: fit(wait=False) → describe / wait / stop / logs, attach by name."""
from __future__ import annotations

import io
import sys
import time
from typing import Any

import boto3
import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker import TrainingJob
from smdist_launcher.backends.sagemaker.logs import LOG_GROUP
from smdist_launcher.backends.sagemaker.progress import Progress

from .aws_env import use_moto


@pytest.fixture()
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    use_moto(monkeypatch, moto_endpoint)
    return moto_endpoint


def _put_logs(job_name: str, lines: dict[str, list[str]]) -> None:
    logs = boto3.client("logs")
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    for host, texts in lines.items():
        stream = f"{job_name}/{host}-1700000000"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=[
            {"timestamp": int(time.time() * 1000) + i, "message": t} for i, t in enumerate(texts)])


def test_fit_without_wait_then_lifecycle_and_attach(aws: str, kwargs: dict[str, Any]) -> None:
    job_name = f"pt-life-{time.monotonic_ns() % 10**12}"
    seen: list[str] = []
    est = PyTorch(**{**kwargs, "hyperparameters": {"epochs": 3, "lr": 0.5}})
    job = est.fit("s3://data-bucket/train", job_name=job_name, wait=False)
    assert isinstance(job, TrainingJob) and est.latest_training_job is job and job.status == "InProgress"
    assert job.describe()["TrainingJobName"] == job_name

    _put_logs(job_name, {"algo-1": ["step 1"], "algo-2": ["step 1 on 2"]})
    job._emit = seen.append
    job.logs()
    assert seen == ["[algo-1] step 1", "[algo-2] step 1 on 2"]
    seen.clear()
    assert job.wait(logs="All", interval=0.01) is job and job.model_data.endswith(f"/{job_name}/output/model.tar.gz")
    assert "[algo-1] step 1" in seen and any(line.startswith(f"[smdist] {job_name}: Completed") for line in seen)

    attached = PyTorch.attach(job_name, region="us-east-1")
    assert attached.latest_training_job.job_name == job_name and attached.model_data == job.model_data
    assert attached.entry_point == "train.py" and attached.instance_count == 2
    assert attached.hyperparameters() and attached.spec.hyperparameters == {"epochs": 3, "lr": 0.5}
    assert attached.distribution == {"torch_distributed": {"enabled": True}}
    assert attached.spec.image_uri == job.describe()["AlgorithmSpecification"]["TrainingImage"]


def test_progress_plain_lines_show_each_transition() -> None:
    lines: list[str] = []
    progress = Progress("job-1", lines.append, live=False)
    base = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting"}
    progress.update({**base, "SecondaryStatusTransitions": [{"Status": "Starting", "StatusMessage": "Preparing"}]})
    progress.update({**base, "SecondaryStatusTransitions": [{"Status": "Starting", "StatusMessage": "Preparing"}]})
    progress.update({**base, "SecondaryStatus": "Training", "SecondaryStatusTransitions": [
        {"Status": "Starting", "StatusMessage": "Preparing"}, {"Status": "Training", "StatusMessage": "Running"}]})
    progress.log_line("[algo-1] hello")
    progress.update({"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "SecondaryStatusTransitions": [
        {"Status": "Starting"}, {"Status": "Training"}]})
    assert lines == ["[smdist] job-1: InProgress / Starting: Preparing",
                     "[smdist] job-1: InProgress / Training: Running",
                     "[algo-1] hello", "[smdist] job-1: Completed / Completed"]


def test_progress_of_a_job_first_seen_ended_shows_each_transition_with_its_status_then() -> None:
    # a short job (or a slow first poll): the whole history arrives in one answer
    lines: list[str] = []
    Progress("job-1", lines.append).update({"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
                                             "SecondaryStatusTransitions": [{"Status": "Starting"},
                                                                            {"Status": "Training"},
                                                                            {"Status": "Completed"}]})
    assert lines == ["[smdist] job-1: InProgress / Starting", "[smdist] job-1: InProgress / Training",
                     "[smdist] job-1: Completed / Completed"]


def test_progress_live_line_is_rewritten(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    lines: list[str] = []
    progress = Progress("job-1", lines.append, live=True)
    progress.update({"TrainingJobStatus": "InProgress", "SecondaryStatusTransitions": [{"Status": "Starting"}]})
    progress.update({"TrainingJobStatus": "InProgress", "SecondaryStatusTransitions": [{"Status": "Starting"},
                                                                                      {"Status": "Training"}]})
    progress.log_line("[algo-1] x")
    progress.close()
    assert out.getvalue() == ("\r\x1b[2K[smdist] job-1: InProgress / Starting"
                              "\r\x1b[2K[smdist] job-1: InProgress / Training\n")
    assert lines == ["[algo-1] x"]


def test_clients_retry_throttling_with_botocore_retry_modes(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from smdist_launcher.backends.sagemaker.aws import AwsClients

    config = AwsClients("us-east-1").sagemaker.meta.config
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 10}
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")  # the user's choice wins
    assert AwsClients("us-east-1").sagemaker.meta.config.retries == {"mode": "standard", "total_max_attempts": 10}
