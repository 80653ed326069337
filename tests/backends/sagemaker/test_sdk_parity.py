"""Parity with the official SageMaker Python SDK (v2): the same example jobs, the same CreateTrainingJob request.

The SDK runs for real against the moto server (S3 upload, CreateTrainingJob); its request is read from the boto3
client's own parameter event, then compared field by field with ours. Every difference must be one of INTENDED,
each justified in docs/sagemaker.md ("Intended differences from the SDK").
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from smdist_launcher.backends.sagemaker.request import build_request, target_for
from smdist_launcher.estimators import estimator_from_job_file

from .aws_env import MOTO_ACCOUNT, use_moto

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NAMES = sorted(p.parents[1].name for p in EXAMPLES.glob("*/plans/job.json"))
REGION = "us-west-2"
BUCKET = f"sagemaker-{REGION}-{MOTO_ACCOUNT}"

# field (flattened key path) → why it differs; docs/sagemaker.md lists the same
INTENDED: dict[str, str] = {
    "DebugHookConfig": "Debugger hook not enabled unless asked (the SDK turns it on by default)",
    "ProfilerConfig": "profiler not configured unless asked (the SDK sends one by default)",
    "Environment.SMDIST_PLAN": "where the shipped launch plan lies in the container",
}
# example → fields that differ there only, and why
INTENDED_PER_EXAMPLE: dict[str, dict[str, str]] = {
    "pytorchddp": {
        "HyperParameters.sagemaker_pytorch_ddp_enabled": "pytorchddp is launched as itself, not rewritten to smdistributed",
        "HyperParameters.sagemaker_distributed_dataparallel_enabled": "(same)",
        "HyperParameters.sagemaker_distributed_dataparallel_custom_mpi_options": "(same)",
    },
}
# examples the SDK refuses although SageMaker runs them
SDK_REFUSES = {"torch_distributed": "is not supported by torch_distributed"}  # exact version strings ("2.3" ≠ "2.3.0")


def _flat(request: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in request.items():
        path = prefix + key
        if isinstance(value, dict) and value and key not in ("Environment", "HyperParameters") or \
                key in ("Environment", "HyperParameters") and isinstance(value, dict):
            out.update(_flat(value, path + "."))
        elif path == "HyperParameters.mp_parameters":
            out[path] = json.loads(value)  # JSON text: key order is not meaning (ours is sorted)
        else:
            out[path] = value
    return out


def _intended(name: str, path: str) -> bool:
    return any(path == k or path.startswith(k + ".") for k in (*INTENDED, *INTENDED_PER_EXAMPLE.get(name, {})))


@pytest.fixture(scope="module")
def sdk(moto_endpoint: str) -> Any:
    mp = pytest.MonkeyPatch()
    use_moto(mp, moto_endpoint, REGION)
    mp.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    sagemaker = pytest.importorskip("sagemaker")
    import sagemaker.telemetry.telemetry_logging as telemetry

    mp.setattr(telemetry, "_requests_helper", lambda *a, **k: None)  # no network from the tests
    yield sagemaker
    mp.undo()


def _sdk_request(sagemaker: Any, name: str) -> dict[str, Any]:
    import boto3
    from sagemaker.pytorch import PyTorch
    from sagemaker.tensorflow import TensorFlow

    data = yaml.safe_load((EXAMPLES / name / "job.yaml").read_text(encoding="utf-8"))
    framework = data.pop("framework")
    data["source_dir"] = str(EXAMPLES / name)
    # the default bucket given: the SDK would ask STS at its public endpoint, which the moto server cannot stand in for
    session = sagemaker.Session(boto_session=boto3.Session(region_name=REGION), default_bucket=BUCKET)
    seen: dict[str, Any] = {}
    session.sagemaker_client.meta.events.register(
        "provide-client-params.sagemaker.CreateTrainingJob",
        lambda params, **_: seen.update(request=json.loads(json.dumps(params))))
    estimator = {"pytorch": PyTorch, "tensorflow": TensorFlow}[framework](sagemaker_session=session, **data)
    estimator.fit(job_name=data["base_job_name"], wait=False, logs=False)
    return seen["request"]


def _our_request(name: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimator_from_job_file(str(EXAMPLES / name / "job.yaml"))
    plan = est.plan()
    return build_request(plan, est.spec, target_for(plan, est.spec, region=REGION, account=MOTO_ACCOUNT))


@pytest.mark.parametrize("name", NAMES)
def test_request_matches_the_sdk(sdk: Any, name: str) -> None:
    if name in SDK_REFUSES:
        with pytest.raises(ValueError, match=SDK_REFUSES[name]):
            _sdk_request(sdk, name)
        return
    theirs, ours = _flat(_sdk_request(sdk, name)), _flat(_our_request(name))
    differences = {k: (theirs.get(k), ours.get(k)) for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)}
    unexplained = {k: v for k, v in differences.items() if not _intended(name, k)}
    assert not unexplained, f"{name}: fields that differ from the SDK (SDK, ours): {unexplained}"
    assert theirs["AlgorithmSpecification.TrainingImage"] == ours["AlgorithmSpecification.TrainingImage"]


def test_intended_differences_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "sagemaker.md").read_text(encoding="utf-8")
    keys = [*INTENDED, *(k for d in INTENDED_PER_EXAMPLE.values() for k in d), "torch_distributed"]
    assert all(f"`{k}`" in doc for k in keys), [k for k in keys if f"`{k}`" not in doc]
