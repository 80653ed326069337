"""Without usable AWS credentials or a region, fit() says in one line what to set."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.errors import AwsSetupError


@pytest.fixture
def no_aws_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where boto3 finds nothing: no variables, no config files, no instance metadata."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
                "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # an earlier test's session caches its credentials


def test_no_region_then_no_credentials(no_aws_setup: None, kwargs: dict[str, Any],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    est = PyTorch(**kwargs)
    with pytest.raises(AwsSetupError) as info:
        est.fit("s3://bucket/train", wait=False)
    assert str(info.value).startswith("region: no AWS region: pass region='us-west-2' to the estimator, "
                                      "set AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    with pytest.raises(AwsSetupError) as info:
        est.fit("s3://bucket/train", wait=False)
    message = str(info.value)
    assert "\n" not in message and message.startswith("credentials: unable to locate credentials; "
                                                      "set AWS_ACCESS_KEY_ID")
    assert info.value.__suppress_context__            # botocore's traceback is not chained below it
    assert isinstance(info.value, ValueError)         # what the CLI reports as bad input (exit 2)



def test_cli_submit_without_credentials_is_one_line_and_exit_2(no_aws_setup: None, code_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from smdist_launcher.cli.main import main

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    job = code_dir / "sm.yaml"
    job.write_text("framework: pytorch\nentry_point: train.py\nrole: arn:aws:iam::111122223333:role/Train\n"
                   "instance_type: ml.p4d.24xlarge\ninstance_count: 2\nframework_version: '2.3'\npy_version: py311\n"
                   "distribution: {torch_distributed: {enabled: true}}\ninputs: {train: s3://bucket/train}\n")
    assert main(["submit", str(job), "--jobs-dir", str(code_dir / "jobs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{job}: credentials: unable to locate credentials; set AWS_ACCESS_KEY_ID")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
