"""Container-command jobs through `smdist serve` with boto3 (what SDK v3 sends: ContainerEntrypoint + arguments, code
as a channel, raw hyperparameters), and what serve refuses at CreateTrainingJob."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .test_serve import _logs, _unique, _wait

# Each host reports what a container sees: its own /opt/ml, hostname, the channels, hyperparameters as sent.
HOST_SCRIPT = r'''
set -e
host=$(hostname)
echo "host=$host job=$TRAINING_JOB_NAME"
echo "hps=$(cat /opt/ml/input/config/hyperparameters.json)"
echo "code=$(cat /opt/ml/input/data/code/hello.txt)"
echo "$host" > /opt/ml/model/model-$host.txt
echo "models: $(ls /opt/ml/model)"
'''
# SageMaker takes one-line container arguments of at most 256 characters: the script comes in the code channel.
HOST_COMMAND = "bash /opt/ml/input/data/code/host.sh"


@pytest.fixture()
def bucket(clients: dict[str, Any]) -> str:
    s3 = clients["s3"]
    name = _unique("cmd")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="input/code/hello.txt", Body=b"hello from the code channel")
    s3.put_object(Bucket=name, Key="input/code/host.sh", Body=HOST_SCRIPT.encode())
    return name


def command_request(bucket: str, name: str, script: str, *, count: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "smdist-train:latest", "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": ["-c", script]},
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "HyperParameters": {"epochs": "2", "optimizer": "sgd", "layers": "[1, 2]"},
        "InputDataConfig": [{"ChannelName": "code", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/input/code",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        **extra,
    }


def test_each_host_runs_the_command_once_in_its_own_opt_ml(clients: dict[str, Any], bucket: str) -> None:
    sagemaker, logs, s3 = clients["sagemaker"], clients["logs"], clients["s3"]
    name = _unique("cmd-ok")
    sagemaker.create_training_job(**command_request(bucket, name, HOST_COMMAND))
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    per_host = _logs(logs, name)
    assert set(per_host) == {"algo-1", "algo-2"}
    for host, lines in per_host.items():
        text = "\n".join(lines)
        assert f"host={host} job={name}" in text
        # hyperparameters.json exactly as sent: raw strings, not JSON-encoded again
        assert 'hps={"epochs": "2", "layers": "[1, 2]", "optimizer": "sgd"}' in text
        assert "code=hello from the code channel" in text
        assert f"model-{host}.txt" in text
    body = s3.get_object(Bucket=bucket, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert {"model-algo-1.txt", "model-algo-2.txt"} <= {Path(n).name for n in tar.getnames()}


def test_a_failing_command_gives_its_failure_file_as_the_reason(clients: dict[str, Any], bucket: str) -> None:
    sagemaker = clients["sagemaker"]
    name = _unique("cmd-fail")
    script = 'echo "the data is bad" > /opt/ml/output/failure; exit 3'
    sagemaker.create_training_job(**command_request(bucket, name, script, count=1))
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Failed"
    assert "the data is bad" in done["FailureReason"]


def _refusal(clients: dict[str, Any], request: dict[str, Any]) -> str:
    with pytest.raises(ClientError) as info:
        clients["sagemaker"].create_training_job(**request)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    return str(info.value.response["Error"]["Message"])


def test_what_cannot_run_is_refused_at_create(clients: dict[str, Any], bucket: str) -> None:
    request = command_request(bucket, _unique("cmd-dummy"), "true")
    request["AlgorithmSpecification"]["TrainingImage"] = "dummy_image"
    assert "training_image" in _refusal(clients, request)

    request = command_request(bucket, _unique("cmd-args"), "true")
    del request["AlgorithmSpecification"]["ContainerEntrypoint"]
    assert "ContainerEntrypoint" in _refusal(clients, request)

    request = command_request(bucket, _unique("cmd-image"), "true")
    spec = request["AlgorithmSpecification"]
    del spec["ContainerEntrypoint"], spec["ContainerArguments"]
    assert "image's own entry point" in _refusal(clients, request)

    request = command_request(bucket, _unique("cmd-fs"), "true")
    request["InputDataConfig"].append({"ChannelName": "nfs", "DataSource": {"FileSystemDataSource": {
        "FileSystemId": "fs-0123456789abcdef0", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
        "DirectoryPath": "/x"}}})
    assert "S3DataSource" in _refusal(clients, request)


def test_v3_mpi_is_refused_on_the_process_backend(clients: dict[str, Any], bucket: str) -> None:
    s3 = clients["s3"]
    mpi = {"process_count_per_node": 2, "mpi_additional_options": []}
    s3.put_object(Bucket=bucket, Key="input/sm_drivers/distributed.json", Body=json.dumps(mpi).encode())
    request = command_request(bucket, _unique("cmd-mpi"), "true")
    request["InputDataConfig"].append({"ChannelName": "sm_drivers", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/input/sm_drivers",
        "S3DataDistributionType": "FullyReplicated"}}})
    message = _refusal(clients, request)
    assert "/etc/environment" in message and "netns" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="the process backend gives hosts a private /opt/ml only as root")
def test_a_single_host_gets_a_private_opt_ml_too(clients: dict[str, Any], bucket: str) -> None:
    sagemaker, logs = clients["sagemaker"], clients["logs"]
    name = _unique("cmd-one")
    sagemaker.create_training_job(**command_request(bucket, name, HOST_COMMAND, count=1))
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert "code=hello from the code channel" in "\n".join(_logs(logs, name)["algo-1"])
