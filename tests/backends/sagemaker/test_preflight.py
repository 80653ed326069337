"""Problems found before any AWS call: nothing is uploaded or created when the input is wrong."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from smdist_launcher import PyTorch, ValidationError
from smdist_launcher.backends.sagemaker import preflight
from smdist_launcher.backends.sagemaker.aws import AwsClients, resolve_region


def _paths(plan, args) -> list[str]:
    return [e.path for e in preflight.problems(plan, args)]


def test_a_complete_job_passes(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    assert _paths(est.plan("s3://data/train", job_name="j"), est.spec) == []


def test_missing_role(kwargs: dict[str, Any]) -> None:
    # (the API's size limits are checked when the estimator is built: spec rules)
    est = PyTorch(**{**kwargs, "role": None})
    found = preflight.problems(est.plan("s3://data/train", job_name="j"), est.spec)
    assert [e.path for e in found] == ["role"]


def test_not_forwarded_settings_and_duplicate_channels(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "rules": [{"name": "r"}], "model_uri": "s3://models/m.tar.gz"})
    assert _paths(est.plan({"model": "s3://data/m"}, job_name="j"), est.spec) == ["rules", "inputs.model"]


def test_local_plans_belong_to_the_local_backend(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "instance_type": "local", "instance_count": 1})
    assert _paths(est.plan("file:///tmp", job_name="j"), est.spec) == ["instance_type"]


def test_local_instance_groups_belong_to_the_local_backend(kwargs: dict[str, Any]) -> None:
    cluster = {k: v for k, v in kwargs.items() if k not in ("instance_type", "instance_count")}
    est = PyTorch(**{**cluster, "instance_groups": [
        {"instance_group_name": "data", "instance_type": "local", "instance_count": 1},
        {"instance_group_name": "train", "instance_type": "local", "instance_count": 2}],
        "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]}})
    plan = est.plan("file:///tmp", job_name="j")
    assert _paths(plan, est.spec) == ["instance_groups"]
    # every group's type counts, not only the distribution group's (plan.instance_type)
    assert _paths(plan.model_copy(update={"instance_type": "ml.p4d.24xlarge"}), est.spec) == ["instance_groups"]


def test_fit_fails_before_any_aws_call(kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # an unreachable endpoint, and a guard that fails the test if any client were even created
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def no_client(self: AwsClients, service: str) -> Any:
        raise AssertionError(f"an AWS client ({service}) was created before validation failed")

    monkeypatch.setattr(AwsClients, "client", no_client)
    est = PyTorch(**{**kwargs, "role": None})
    with pytest.raises(ValidationError) as info:
        est.fit("s3://data/train")
    assert [e.path for e in info.value.errors] == ["role"]
    assert "IAM execution role" in str(info.value)
    assert est.latest_job is None


def test_region_is_required(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert resolve_region("eu-west-1") == "eu-west-1"
    with pytest.raises(ValidationError, match="region: no AWS region"):
        resolve_region(None)


def test_importing_the_backend_does_not_import_boto3() -> None:
    code = "import sys, smdist_launcher.backends.sagemaker; assert 'boto3' not in sys.modules, 'boto3 imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
