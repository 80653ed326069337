"""Our own SageMaker path end to end against `smdist serve` + moto (S3, STS): fit(wait=False), wait with status
transitions and every host's logs, attach, stop, and the CLI's status/stop/logs."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.cli.main import main
from smdist_launcher.errors import JobFailedError

from .test_serve import TRAIN


@pytest.fixture()
def est_kwargs(clients: dict[str, Any], moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_IAM", moto_endpoint)
    monkeypatch.setenv("SMDIST_SAGEMAKER_POLL_S", "0.2")
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    return dict(entry_point="train.py", source_dir=str(code), role="arn:aws:iam::123456789012:role/R",
                instance_type="ml.m5.xlarge", instance_count=2, framework_version="2.3", py_version="py311",
                region="us-east-1")


def test_fit_wait_shows_transitions_and_host_logs_then_attach(est_kwargs: dict) -> None:
    lines: list[str] = []
    est = PyTorch(**est_kwargs)
    name = f"ours-{time.monotonic_ns() % 10**10}"
    job = est.fit(job_name=name, wait=False)
    job._emit = lines.append
    job.wait(logs="All")
    assert job.status == "Completed" and job.model_data.endswith(f"/{name}/output/model.tar.gz")
    statuses = [line for line in lines if line.startswith(f"[smdist] {name}: ")]
    assert statuses[0].startswith(f"[smdist] {name}: InProgress / Starting")
    assert any("/ Training" in s for s in statuses) and statuses[-1].startswith(f"[smdist] {name}: Completed")
    assert "[algo-1] hello from algo-1" in lines and "[algo-2] hello from algo-2" in lines
    attached = PyTorch.attach(name, region="us-east-1")
    assert attached.model_data == job.model_data and attached.instance_count == 2


def test_jobs_lists_sagemaker_jobs_submitted_elsewhere(est_kwargs: dict, clients: dict[str, Any],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from .test_serve import _request, _wait

    name = f"elsewhere-{time.monotonic_ns() % 10**10}"
    bucket = f"b-{name}"
    clients["s3"].create_bucket(Bucket=bucket)
    clients["sagemaker"].create_training_job(**_request(bucket, name))  # not through smdist: no local record
    _wait(clients["sagemaker"], name)
    assert main(["jobs", "--sagemaker", "--region", "us-east-1"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(name))
    assert "Failed" in line or "Completed" in line


def test_stop_a_running_job_from_the_cli(est_kwargs: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    est = PyTorch(**{**est_kwargs, "environment": {"MODE": "sleep", "PIDS_DIR": str(pids)}})
    name = f"ours-stop-{time.monotonic_ns() % 10**10}"
    job = est.fit(job_name=name, wait=False)
    capsys.readouterr()
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert main(["status", name, "--region", "us-east-1"]) == 0
    assert capsys.readouterr().out.startswith(f"{name}  InProgress / Training")
    assert main(["stop", name, "--region", "us-east-1"]) == 0
    with pytest.raises(JobFailedError) as info:
        job.wait(logs=False)
    assert info.value.status == "Stopped"
    assert main(["logs", name, "--region", "us-east-1"]) == 0
    assert "[algo-2] sleeping" in capsys.readouterr().out.splitlines()
