"""Where the request and validation follow the SageMaker SDK (v2): issue 10 §1, one test per finding. Pure."""
from __future__ import annotations

import json
from typing import Any

import pytest

from smdist_launcher import PyTorch, TensorFlow, ValidationError
from smdist_launcher.backends.sagemaker import build_request
from smdist_launcher.backends.sagemaker.request import target_for

ACCOUNT = "999988887777"


def _request(est: Any, inputs: Any = "s3://data/train", **kw: Any) -> dict[str, Any]:
    plan = est.plan(inputs, job_name="job-1")
    return build_request(plan, est.spec, target_for(plan, est.spec, region="us-west-2", account=ACCOUNT, **kw))


def _paths(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    return {e.path: e.message for e in exc.value.errors}


def test_smp_v2_job_gets_the_smp_image(kwargs: dict[str, Any]) -> None:
    dist = {"torch_distributed": {"enabled": True},
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 16}}}}
    est = PyTorch(**{**kwargs, "framework_version": "2.3.1", "distribution": dist})
    assert _request(est)["AlgorithmSpecification"]["TrainingImage"] == \
        "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.3.1-gpu-py311-cu121"


def test_tensorflow_model_dir_is_under_the_default_bucket(kwargs: dict[str, Any]) -> None:
    tf = {**kwargs, "framework_version": "2.13", "py_version": "py310", "instance_type": "ml.c5.2xlarge",
          "distribution": {"parameter_server": {"enabled": True}}}
    request = _request(TensorFlow(**tf))
    assert request["HyperParameters"]["model_dir"] == json.dumps(f"s3://sagemaker-us-west-2-{ACCOUNT}/job-1/model")
    mpi = TensorFlow(**{**tf, "distribution": {"mpi": {"enabled": True}}})
    assert _request(mpi)["HyperParameters"]["model_dir"] == '"/opt/ml/model"'  # the SDK's choice under MPI
    given = TensorFlow(**{**tf, "output_path": "s3://out/runs"})
    assert _request(given)["HyperParameters"]["model_dir"] == '"s3://out/runs/job-1/model"'


def test_container_log_level_is_sent(kwargs: dict[str, Any]) -> None:
    assert _request(PyTorch(**kwargs))["HyperParameters"]["sagemaker_container_log_level"] == "20"
    assert _request(PyTorch(**{**kwargs, "container_log_level": 10}))["HyperParameters"][
        "sagemaker_container_log_level"] == "10"


class TrainingInput:  # the SDK's shape: .config holds the API's Channel fields
    def __init__(self, s3_data: str, distribution: str = "FullyReplicated", input_mode: str | None = None,
                 content_type: str | None = None) -> None:
        self.config: dict[str, Any] = {"DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": s3_data, "S3DataDistributionType": distribution}}}
        if input_mode:
            self.config["InputMode"] = input_mode
        if content_type:
            self.config["ContentType"] = content_type


class InstanceGroup:
    def __init__(self, name: str, instance_type: str, count: int) -> None:
        self.instance_group_name, self.instance_type, self.instance_count = name, instance_type, count


class TensorBoardOutputConfig:
    def __init__(self, s3_output_path: str, container_local_output_path: str | None = None) -> None:
        self.s3_output_path, self.container_local_output_path = s3_output_path, container_local_output_path


def test_sdk_objects_are_accepted_by_shape(kwargs: dict[str, Any]) -> None:
    args = {k: v for k, v in kwargs.items() if k not in ("instance_type", "instance_count")}
    est = PyTorch(**args, instance_groups=[InstanceGroup("train", "ml.p4d.24xlarge", 2)],
                  tensorboard_output_config=TensorBoardOutputConfig("s3://tb/logs", "/opt/ml/output/tensorboard"))
    request = _request(est, {"train": TrainingInput("s3://data/train", "ShardedByS3Key", "FastFile", "text/csv"),
                             "test": "s3://data/test"})
    assert request["InputDataConfig"][1] == {
        "ChannelName": "train", "ContentType": "text/csv", "InputMode": "FastFile",
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://data/train",
                                        "S3DataDistributionType": "ShardedByS3Key"}}}
    assert request["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "InstanceGroupName": "train"}]
    assert request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://tb/logs",
                                                  "LocalPath": "/opt/ml/output/tensorboard"}
    alone = _request(PyTorch(**kwargs), TrainingInput("s3://data/all"))
    assert [c["ChannelName"] for c in alone["InputDataConfig"]] == ["training"]
    manifest = TrainingInput("s3://data/m")
    manifest.config["DataSource"]["S3DataSource"]["S3DataType"] = "ManifestFile"
    with pytest.raises(ValidationError) as info:
        PyTorch(**kwargs).plan({"train": manifest})
    assert "inputs.train.S3DataType" in _paths(info)


def test_smddp_on_tensorflow_2_12_and_later_is_refused(kwargs: dict[str, Any]) -> None:
    tf = {**kwargs, "framework_version": "2.13", "py_version": "py310",
          "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}}
    with pytest.raises(ValidationError) as info:
        TensorFlow(**tf)
    assert list(_paths(info)) == ["framework_version"] and "< 2.12" in _paths(info)["framework_version"]
    TensorFlow(**{**tf, "framework_version": "2.11", "py_version": "py39"})


def test_image_without_smdistributed_is_refused(kwargs: dict[str, Any]) -> None:
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.0.1-gpu-py310-cu121-ubuntu20.04-sagemaker"
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "image_uri": image,
                   "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}})
    assert list(_paths(info)) == ["image_uri"]
    PyTorch(**{**kwargs, "image_uri": image})  # torch_distributed does not need the libraries


@pytest.mark.parametrize("dist", [{"smdistributed": {"dataparallel": {"enabled": True}}},
                                  {"pytorchddp": {"enabled": True}}])
def test_smddp_only_on_supported_instance_types(kwargs: dict[str, Any], dist: dict[str, Any]) -> None:
    for instance_type in ("ml.g5.48xlarge", "ml.p5.48xlarge", "ml.p3.8xlarge"):
        with pytest.raises(ValidationError) as info:
            PyTorch(**{**kwargs, "framework_version": "2.2.0", "py_version": "py310", "instance_type": instance_type,
                       "distribution": dist})
        assert list(_paths(info)) == ["distribution." + next(iter(dist))], instance_type
        assert "ml.p4d.24xlarge" in str(info.value)
    # AWS's SMDDP table lists ml.p3.16xlarge too (the SDK accepts it; issue 18)
    for instance_type in ("ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "local_gpu"):
        PyTorch(**{**kwargs, "framework_version": "2.2.0", "py_version": "py310", "instance_type": instance_type,
                   "distribution": dist})


def test_unknown_framework_version_names_the_nearest(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "framework_version": "9.9"})
    message = _paths(info)["framework_version"]
    assert list(_paths(info)) == ["framework_version"] and "nearest: " in message and "2.8.0" in message
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "framework_version": "2.3.7"})
    assert "nearest: 2.3, 2.3.0, 2.3.1" in _paths(info)["framework_version"]
    PyTorch(**{**kwargs, "framework_version": "9.9", "instance_type": "local"})  # local mode needs no image


def test_py_version_without_an_image_is_reported_before_any_aws_call(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "py_version": "py310"})
    with pytest.raises(ValidationError) as info:
        est.request("s3://data/train", job_name="job-1")
    assert list(_paths(info)) == ["py_version"] and "'py311'" in _paths(info)["py_version"]
