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
        "HyperParameters.sagemaker_pytorch_ddp_enabled":
            "pytorchddp is launched as itself, not rewritten to smdistributed",
        "HyperParameters.sagemaker_distributed_dataparallel_enabled": "(same)",
        "HyperParameters.sagemaker_distributed_dataparallel_custom_mpi_options": "(same)",
    },
}
# examples the SDK refuses although SageMaker runs them
SDK_REFUSES = {"torch_distributed": "is not supported by torch_distributed",  # exact version strings ("2.3" ≠ "2.3.0")
               "heterogeneous": "is not supported by torch_distributed"}  # (same; GROUP_CASES run it with "2.3.0")


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
    if data.get("instance_groups"):  # the SDK takes its own InstanceGroup objects, in distribution too
        from sagemaker.instance_group import InstanceGroup

        groups = {g["instance_group_name"]: InstanceGroup(**g) for g in data["instance_groups"]}
        data["instance_groups"] = list(groups.values())
        if "instance_groups" in data.get("distribution", {}):
            data["distribution"]["instance_groups"] = [groups[n] for n in data["distribution"]["instance_groups"]]
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
    differences = {k: (theirs.get(k), ours.get(k)) for k in sorted(set(theirs) | set(ours))
                   if theirs.get(k) != ours.get(k)}
    unexplained = {k: v for k, v in differences.items() if not _intended(name, k)}
    assert not unexplained, f"{name}: fields that differ from the SDK (SDK, ours): {unexplained}"
    assert theirs["AlgorithmSpecification.TrainingImage"] == ours["AlgorithmSpecification.TrainingImage"]


def test_intended_differences_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "sagemaker.md").read_text(encoding="utf-8")
    keys = [*INTENDED, *(k for d in INTENDED_PER_EXAMPLE.values() for k in d), "torch_distributed", *GROUP_INTENDED]
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
        # AWS's SMDDP table lists ml.p3.16xlarge and the SDK accepts it (issue 18: it used to be refused here)
        "smddp_p3_16xlarge": ("pytorch", {
            **common, "instance_type": "ml.p3.16xlarge", "instance_count": 2, "framework_version": "2.2.0",
            "py_version": "py310", "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
            f"s3://{BUCKET}/data/train"),
    }


CASES = ("sdk_objects_and_log_level", "huggingface_gpu_tag", "trainium_neuron_image", "smddp_p3_16xlarge")


def _both_requests(sdk: Any, framework: str, kwargs: dict[str, Any], inputs: Any, job_name: str,
                   ours_kwargs: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the SDK's request, ours) for the same estimator arguments (ours_kwargs: ours, where they are not the same)."""
    import boto3
    from sagemaker.huggingface import HuggingFace as SdkHuggingFace
    from sagemaker.pytorch import PyTorch as SdkPyTorch
    from sagemaker.tensorflow import TensorFlow as SdkTensorFlow

    from smdist_launcher import HuggingFace, PyTorch, TensorFlow

    s3 = boto3.client("s3", region_name=REGION)
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:  # output_path's bucket must exist
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    session = sdk.Session(boto_session=boto3.Session(region_name=REGION), default_bucket=BUCKET)
    seen: dict[str, Any] = {}
    session.sagemaker_client.meta.events.register(
        "provide-client-params.sagemaker.CreateTrainingJob",
        lambda params, **_: seen.update(request=json.loads(json.dumps(params))))
    theirs_cls, ours_cls = {"pytorch": (SdkPyTorch, PyTorch), "huggingface": (SdkHuggingFace, HuggingFace),
                            "tensorflow": (SdkTensorFlow, TensorFlow)}[framework]
    theirs_cls(sagemaker_session=session, **kwargs).fit(inputs, job_name=job_name, wait=False, logs=False)

    ours_est = ours_cls(**(ours_kwargs or kwargs))
    plan = ours_est.plan(inputs, job_name=job_name)
    return seen["request"], build_request(plan, ours_est.spec,
                                          target_for(plan, ours_est.spec, region=REGION, account=MOTO_ACCOUNT))


def _unexplained(case: str, theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    flat_theirs, flat_ours = _flat(theirs), _flat(ours)
    return {k: (flat_theirs.get(k), flat_ours.get(k)) for k in sorted(set(flat_theirs) | set(flat_ours))
            if flat_theirs.get(k) != flat_ours.get(k) and not _intended(case, k)}


@pytest.mark.parametrize("case", CASES)
def test_more_jobs_match_the_sdk(sdk: Any, case: str, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    framework, kwargs, inputs = _cases(sdk, str(tmp_path))[case]
    theirs, ours = _both_requests(sdk, framework, kwargs, inputs, case.replace("_", "-"))
    differences = _unexplained(case, theirs, ours)
    assert not differences, f"{case}: fields that differ from the SDK (SDK, ours): {differences}"


# Heterogeneous clusters: the SDK's InstanceGroup objects, the data group first
# (so the distribution's master is algo-2).
# case → fields that differ there only, and why (docs/sagemaker.md lists them)
GROUP_INTENDED: dict[str, str] = {
    "HyperParameters.sagemaker_distribution_instance_groups": "written next to torch_distributed too, so the "
                                                              "container knows which group runs torchrun",
    "HyperParameters.sagemaker_instance_type": "the distribution group's type (the SDK sends null, or nothing next "
                                               "to torch_distributed, when there are instance groups)",
}


def _group_cases(sagemaker: Any, code: str) -> dict[str, tuple[str, dict[str, Any]]]:
    from sagemaker.instance_group import InstanceGroup

    data = InstanceGroup("data", "ml.c5.18xlarge", 1)
    train = InstanceGroup("train", "ml.p4d.24xlarge", 2)
    pytorch = dict(entry_point="train.py", source_dir=code, role="arn:aws:iam::111122223333:role/R",
                   framework_version="2.3.0", py_version="py311", instance_groups=[data, train])
    return {
        "groups_mpi": ("pytorch", {**pytorch, "distribution": {"mpi": {"enabled": True}, "instance_groups": [train]}}),
        # the SDK lists smdistributed.dataparallel versions one by one, up to 2.2.0
        "groups_smddp": ("pytorch", {**pytorch, "framework_version": "2.2.0", "py_version": "py310", "distribution": {
            "smdistributed": {"dataparallel": {"enabled": True}}, "instance_groups": [train]}}),
        "groups_pytorchddp": ("pytorch", {**pytorch, "framework_version": "2.2.0", "py_version": "py310",
                                          "distribution": {"pytorchddp": {"enabled": True},
                                                           "instance_groups": [train]}}),
        "groups_torch_distributed": ("pytorch", {**pytorch, "distribution": {
            "torch_distributed": {"enabled": True}, "instance_groups": [train]}}),
        "groups_tensorflow_horovod": ("tensorflow", {
            **pytorch, "framework_version": "2.13", "py_version": "py310",
            "instance_groups": [data, InstanceGroup("gpu", "ml.p3.16xlarge", 2)],
            "distribution": {"mpi": {"enabled": True, "processes_per_host": 8}, "instance_groups": ["gpu"]}}),
        "groups_no_distribution": ("pytorch", pytorch),  # the GPU image: the SDK's image follows the first g*/p* group
    }


GROUP_CASES = ("groups_mpi", "groups_smddp", "groups_pytorchddp", "groups_torch_distributed",
               "groups_tensorflow_horovod", "groups_no_distribution")


@pytest.mark.parametrize("case", GROUP_CASES)
def test_heterogeneous_jobs_match_the_sdk(sdk: Any, case: str, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    framework, kwargs = _group_cases(sdk, str(tmp_path))[case]
    ours_kwargs = kwargs
    dist = kwargs.get("distribution")
    if dist and isinstance(dist["instance_groups"][0], str):  # the SDK wants the group object, ours takes either
        groups = {g.instance_group_name: g for g in kwargs["instance_groups"]}
        kwargs = {**kwargs, "distribution": {**dist, "instance_groups": [groups[n] for n in dist["instance_groups"]]}}
    theirs, ours = _both_requests(sdk, framework, kwargs, f"s3://{BUCKET}/data/train", case.replace("_", "-"),
                                  ours_kwargs)
    intended = {**GROUP_INTENDED, **(INTENDED_PER_EXAMPLE["pytorchddp"] if case == "groups_pytorchddp" else {})}
    differences = {k: v for k, v in _unexplained(case, theirs, ours).items() if k not in intended}
    assert not differences, f"{case}: fields that differ from the SDK (SDK, ours): {differences}"
    assert ours["ResourceConfig"]["InstanceGroups"][0]["InstanceGroupName"] == "data"  # order kept: master is algo-2


# Heterogeneous jobs the SDK refuses (at construction or at fit): ours refuses them too, before anything starts.
# case → (framework, distribution, the SDK's message, the key path of our error)
GROUP_REFUSALS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "strategy_without_group": ("pytorch", {"mpi": {"enabled": True}}, "only contain one instance group",
                               "distribution.instance_groups"),
    "two_groups_named": ("pytorch", {"mpi": {"enabled": True}, "instance_groups": ["data", "train"]},
                         "only contain one instance group", "distribution.instance_groups"),
    "unknown_group_named": ("pytorch", {"mpi": {"enabled": True}, "instance_groups": ["nope"]},
                            "Invalid training instance group", "distribution.instance_groups[0]"),
    "group_without_strategy": ("pytorch", {"instance_groups": ["train"]}, "no distribution strategies enabled",
                               "distribution.instance_groups"),
    "parameter_server": ("tensorflow", {"parameter_server": {"enabled": True}, "instance_groups": ["train"]},
                         "no distribution strategies enabled", "distribution.parameter_server"),
    "multi_worker_mirrored": ("tensorflow", {"multi_worker_mirrored_strategy": {"enabled": True},
                                             "instance_groups": ["train"]},
                              "no distribution strategies enabled", "distribution.multi_worker_mirrored_strategy"),
}


@pytest.mark.parametrize("case", sorted(GROUP_REFUSALS))
def test_heterogeneous_jobs_the_sdk_refuses_are_refused(sdk: Any, case: str, tmp_path: Path) -> None:
    from sagemaker.instance_group import InstanceGroup

    from smdist_launcher import PyTorch, TensorFlow
    from smdist_launcher.errors import ValidationError

    (tmp_path / "train.py").write_text("print('hi')\n")
    framework, distribution, sdk_message, our_path = GROUP_REFUSALS[case]
    groups = {"data": InstanceGroup("data", "ml.c5.18xlarge", 1), "train": InstanceGroup("train", "ml.p3.16xlarge", 2),
              "nope": InstanceGroup("nope", "ml.p3.16xlarge", 1)}
    versions = {"pytorch": ("2.3.0", "py311"), "tensorflow": ("2.13", "py310")}[framework]
    kwargs = dict(entry_point="train.py", source_dir=str(tmp_path), role="arn:aws:iam::111122223333:role/R",
                  framework_version=versions[0], py_version=versions[1],
                  instance_groups=[groups["data"], groups["train"]])
    named = [groups[n] for n in distribution.get("instance_groups", [])]
    with pytest.raises(ValueError, match=sdk_message):
        _both_requests(sdk, framework, {**kwargs, "distribution": {**distribution, "instance_groups": named} if named
                                        else distribution}, None, case.replace("_", "-"))
    with pytest.raises(ValidationError) as refused:
        {"pytorch": PyTorch, "tensorflow": TensorFlow}[framework](**kwargs, distribution=distribution).plan()
    assert our_path in [e.path for e in refused.value.errors], refused.value.render()
