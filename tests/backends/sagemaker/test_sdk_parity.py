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
    "HyperParameters.sagemaker_mpi_num_of_processes_per_host": "written whenever the plan's count is not the "
                                                               "instance default, so the container starts exactly it",
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
        elif path == "InputDataConfig":  # ours in channel-name order (stable pins), the SDK's in the caller's order
            out.update(_flat({c["ChannelName"]: c for c in value}, path + "."))
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


# Jobs beyond the examples, each exercising a fidelity finding; the SDK's own objects are handed to both estimators.
def _cases(sagemaker: Any, code: str) -> dict[str, tuple[str, dict[str, Any], Any]]:
    from sagemaker.debugger import TensorBoardOutputConfig
    from sagemaker.inputs import TrainingInput

    common = dict(entry_point="train.py", source_dir=code, role="arn:aws:iam::111122223333:role/service-role/R")
    return {
        "sdk_objects_and_log_level": ("pytorch", {
            **common, "instance_type": "ml.p4d.24xlarge", "instance_count": 2, "framework_version": "2.3.0",
            "py_version": "py311", "container_log_level": 10, "output_path": f"s3://{BUCKET}/runs",
            "distribution": {"torch_distributed": {"enabled": True}},
            "tensorboard_output_config": TensorBoardOutputConfig(f"s3://{BUCKET}/tb", "/opt/ml/output/tensorboard")},
            {"train": TrainingInput(f"s3://{BUCKET}/data/train", distribution="ShardedByS3Key", input_mode="FastFile"),
             "test": f"s3://{BUCKET}/data/test"}),
        "huggingface_gpu_tag": ("huggingface", {
            **common, "instance_type": "ml.g5.12xlarge", "instance_count": 1, "transformers_version": "4.36",
            "pytorch_version": "2.1", "py_version": "py310"}, f"s3://{BUCKET}/data/train"),
        "trainium_neuron_image": ("pytorch", {
            **common, "instance_type": "ml.trn1.32xlarge", "instance_count": 2, "framework_version": "1.11.0",
            "py_version": "py38", "distribution": {"torch_distributed": {"enabled": True}}}, None),
    }


CASES = ("sdk_objects_and_log_level", "huggingface_gpu_tag", "trainium_neuron_image")


@pytest.mark.parametrize("case", CASES)
def test_more_jobs_match_the_sdk(sdk: Any, case: str, tmp_path: Path) -> None:
    import boto3
    from sagemaker.huggingface import HuggingFace as SdkHuggingFace
    from sagemaker.pytorch import PyTorch as SdkPyTorch

    from smdist_launcher import HuggingFace, PyTorch

    (tmp_path / "train.py").write_text("print('hi')\n")
    s3 = boto3.client("s3", region_name=REGION)
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:  # output_path's bucket must exist
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    framework, kwargs, inputs = _cases(sdk, str(tmp_path))[case]
    session = sdk.Session(boto_session=boto3.Session(region_name=REGION), default_bucket=BUCKET)
    seen: dict[str, Any] = {}
    session.sagemaker_client.meta.events.register(
        "provide-client-params.sagemaker.CreateTrainingJob",
        lambda params, **_: seen.update(request=json.loads(json.dumps(params))))
    theirs_cls, ours_cls = {"pytorch": (SdkPyTorch, PyTorch), "huggingface": (SdkHuggingFace, HuggingFace)}[framework]
    theirs_cls(sagemaker_session=session, **kwargs).fit(inputs, job_name=case.replace("_", "-"), wait=False, logs=False)

    ours_est = ours_cls(**kwargs)
    plan = ours_est.plan(inputs, job_name=case.replace("_", "-"))
    ours = build_request(plan, ours_est.spec, target_for(plan, ours_est.spec, region=REGION, account=MOTO_ACCOUNT))
    theirs, ours_flat = _flat(seen["request"]), _flat(ours)
    differences = {k: (theirs.get(k), ours_flat.get(k)) for k in sorted(set(theirs) | set(ours_flat))
                   if theirs.get(k) != ours_flat.get(k) and not _intended(case, k)}
    assert not differences, f"{case}: fields that differ from the SDK (SDK, ours): {differences}"
