"""smdist submit / status / logs / jobs for SageMaker jobs, against a real moto server (stop: tests/serve, moto has no
StopTrainingJob)."""
from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest

from smdist_launcher.cli.main import main

from .aws_env import use_moto
from .test_lifecycle import _put_logs


@pytest.fixture()
def job_file(tmp_path: Path, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    use_moto(monkeypatch, moto_endpoint)
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text("framework: pytorch\nentry_point: train.py\nsource_dir: .\nrole: arn:aws:iam::123456789012:role/R\n"
                    "instance_type: ml.p4d.24xlarge\ninstance_count: 2\nframework_version: '2.3'\npy_version: py311\n"
                    "distribution:\n  torch_distributed:\n    enabled: true\ninputs:\n  train: s3://data-bucket/train\n")
    return path


def test_submit_then_status_logs_jobs_stop(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"cli-sm-{time.monotonic_ns() % 10**12}"
    assert main(["submit", str(job_file), "--job-name", name]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == name
    assert boto3.client("sagemaker").describe_training_job(TrainingJobName=name)["TrainingJobName"] == name

    assert main(["status", name]) == 0
    status = capsys.readouterr().out
    assert status.startswith(f"{name}  Completed") and "(sagemaker)" in status and "model.tar.gz" in status

    _put_logs(name, {"algo-1": ["loss 0.1"], "algo-2": ["loss 0.2"]})
    assert main(["logs", name, "--follow"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["[algo-1] loss 0.1", "[algo-2] loss 0.2"]

    assert main(["jobs"]) == 0
    listing = capsys.readouterr().out
    assert name in listing and "Completed" in listing and "Interrupted" not in listing


def test_status_of_a_job_submitted_elsewhere_and_of_none(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"cli-sm-other-{time.monotonic_ns() % 10**12}"
    assert main(["submit", str(job_file), "--job-name", name, "--jobs-dir", str(job_file.parent / "elsewhere")]) == 0
    capsys.readouterr()
    assert main(["status", name, "--json"]) == 0  # not in this jobs folder: asked from SageMaker
    assert '"backend": "sagemaker"' in capsys.readouterr().out
    assert main(["status", "no-such-job-anywhere"]) == 2
    assert "no job named 'no-such-job-anywhere'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["status", "stop", "logs"])
def test_no_credentials_is_one_line(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # earlier tests' session caches their credentials
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                       "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1",
                       "SMDIST_JOBS_DIR": str(tmp_path / "jobs")}.items():
        monkeypatch.setenv(key, value)
    assert main([command, "some-job"]) == 2
    err = capsys.readouterr().err
    assert "credentials: unable to locate credentials; set AWS_ACCESS_KEY_ID" in err and "Traceback" not in err
