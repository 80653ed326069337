"""fit() on ml.* instance types against a real moto server: upload, CreateTrainingJob, wait, CloudWatch logs."""
from __future__ import annotations

import io
import json
import tarfile
import time
from typing import Any

import boto3
import pytest

from smdist_launcher import PyTorch, ValidationError
from smdist_launcher.backends.sagemaker import wait_for_job
from smdist_launcher.backends.sagemaker.aws import AwsClients
from smdist_launcher.backends.sagemaker.logs import LOG_GROUP, LogTail
from smdist_launcher.plan.model import REDACTED, LaunchPlan

from .aws_env import MOTO_ACCOUNT, use_moto

DEFAULT_BUCKET = f"sagemaker-us-east-1-{MOTO_ACCOUNT}"


@pytest.fixture()
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    use_moto(monkeypatch, moto_endpoint)
    return moto_endpoint


def _unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns() % 10**12}"  # the moto server is shared by the whole session


def _archive(bucket: str, key: str) -> dict[str, bytes]:
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_fit_submits_uploads_and_completes(aws: str, kwargs: dict[str, Any],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    est = PyTorch(**kwargs)
    job_name = _unique("pt-e2e")
    job = est.fit({"train": "s3://data-bucket/train"}, job_name=job_name, logs=False)

    assert job.status == "Completed" and est.latest_job is job
    assert est.model_data == job.model_data == f"s3://{DEFAULT_BUCKET}/{job_name}/output/model.tar.gz"
    submit = f"s3://{DEFAULT_BUCKET}/{job_name}/source/sourcedir.tar.gz"
    assert job.submit_directory == submit

    files = _archive(DEFAULT_BUCKET, f"{job_name}/source/sourcedir.tar.gz")
    assert sorted(files) == [".smdist/launchplan.json", "pkg/model.py", "train.py"]
    shipped = LaunchPlan.from_json(files[".smdist/launchplan.json"])
    assert shipped.job_name == job_name and shipped.environment["HF_TOKEN"] == REDACTED
    assert json.loads(shipped.sagemaker_hyperparameters["sagemaker_submit_directory"]) == submit

    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    assert described["HyperParameters"] == shipped.sagemaker_hyperparameters
    assert described["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert described["RoleArn"] == kwargs["role"]
    assert [c["ChannelName"] for c in described["InputDataConfig"]] == ["train"]
    assert described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://data-bucket/train"
    assert described["ResourceConfig"] == {"VolumeSizeInGB": 30, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge"}
    assert described["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.3-gpu-py311")
    out = capsys.readouterr().out
    assert f"uploaded code to {submit}" in out and "hf-secret" not in out


def test_logs_are_streamed_per_host(aws: str, kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    job_name = _unique("pt-logs")
    logs = boto3.client("logs")
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    for host, lines in {"algo-1": ["epoch 1 loss 0.5", "epoch 2 loss 0.25"], "algo-2": ["worker ready"]}.items():
        stream = f"{job_name}/{host}-1700000000"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=[
            {"timestamp": int(time.time() * 1000) + i, "message": line} for i, line in enumerate(lines)])

    out_bucket = _unique("out")
    boto3.client("s3").create_bucket(Bucket=out_bucket)  # a user's output bucket is never created for them
    role = _unique("Train")
    boto3.client("iam").create_role(RoleName=role, Path="/service-role/", AssumeRolePolicyDocument="{}")
    PyTorch(**{**kwargs, "role": role, "output_path": f"s3://{out_bucket}/runs"}).fit(
        "s3://data-bucket/train", job_name=job_name)

    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("[algo")] == \
        ["[algo-1] epoch 1 loss 0.5", "[algo-1] epoch 2 loss 0.25", "[algo-2] worker ready"]
    assert any(line.startswith(f"[smdist] {job_name}: Completed") for line in out)  # status with secondary status
    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    # a role name is looked up in IAM (GetRole), so its path stays
    assert described["RoleArn"] == f"arn:aws:iam::{MOTO_ACCOUNT}:role/service-role/{role}"
    assert described["OutputDataConfig"]["S3OutputPath"] == f"s3://{out_bucket}/runs"


def test_missing_user_bucket_is_reported_before_the_upload(aws: str, kwargs: dict[str, Any]) -> None:
    job_name = _unique("pt-nobucket")
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "output_path": "s3://no-such-bucket-here/runs"}).fit("s3://data-bucket/train",
                                                                                  job_name=job_name)
    assert [e.path for e in info.value.errors] == ["output_path"] and "does not exist" in str(info.value)
    sagemaker = boto3.client("sagemaker")
    with pytest.raises(sagemaker.exceptions.ClientError):
        sagemaker.describe_training_job(TrainingJobName=job_name)  # no job was created


def test_unknown_role_name_is_reported_before_the_upload(aws: str, kwargs: dict[str, Any]) -> None:
    job_name = _unique("pt-norole")
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "role": "NoSuchRoleHere"}).fit("s3://data-bucket/train", job_name=job_name)
    assert [e.path for e in info.value.errors] == ["role"] and "no IAM role named 'NoSuchRoleHere'" in str(info.value)
    s3 = boto3.client("s3")
    if any(b["Name"] == DEFAULT_BUCKET for b in s3.list_buckets()["Buckets"]):
        assert s3.list_objects_v2(Bucket=DEFAULT_BUCKET, Prefix=job_name).get("KeyCount", 0) == 0  # nothing uploaded


def test_log_tail_emits_only_new_lines(aws: str) -> None:
    job_name = _unique("tail")
    logs = boto3.client("logs")
    seen: list[str] = []
    tail = LogTail(logs, job_name, seen.append)
    assert tail.poll() == 0  # no group or stream yet: nothing, no error
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    stream = f"{job_name}/algo-1-1"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    now = int(time.time() * 1000)
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=[{"timestamp": now, "message": "a"}])
    assert tail.poll() == 1
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                        logEvents=[{"timestamp": now + 1, "message": "b"}])
    assert tail.poll() == 1 and tail.poll() == 0
    assert seen == ["[algo-1] a", "[algo-1] b"]


def test_wait_false_then_wait_for_job(aws: str, kwargs: dict[str, Any]) -> None:
    job_name = _unique("pt-nowait")
    job = PyTorch(**kwargs).fit("s3://data-bucket/train", job_name=job_name, wait=False)
    assert job.status == "InProgress" and job.arn and job.arn.endswith(f"training-job/{job_name}")
    lines: list[str] = []
    done = wait_for_job(AwsClients("us-east-1"), job_name, logs=False, interval=0.05, emit=lines.append)
    assert done.status == "Completed" and done.model_data.endswith(f"/{job_name}/output/model.tar.gz")


def test_fit_heterogeneous_cluster_then_attach(aws: str, kwargs: dict[str, Any],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    groups = [{"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "instance_count": 1},
              {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    cluster = {k: v for k, v in kwargs.items() if k not in ("instance_type", "instance_count")}
    est = PyTorch(**{**cluster, "instance_groups": groups,
                     "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]}})
    job_name = _unique("pt-groups")
    est.fit("s3://data-bucket/train", job_name=job_name, wait=False)
    assert (f"created training job {job_name} (data: 1 x ml.c5.18xlarge, train: 2 x ml.p4d.24xlarge)"
            in capsys.readouterr().out)

    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    assert [g["InstanceGroupName"] for g in described["ResourceConfig"]["InstanceGroups"]] == ["data", "train"]
    attached = PyTorch.attach(job_name, region="us-east-1", wait=False)
    assert attached.distribution == {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]}
    assert attached.plan(job_name=job_name).master.host == "algo-2"


def test_request_marks_a_role_name_as_resolved_at_submit(aws: str, kwargs: dict[str, Any]) -> None:
    # fit() asks IAM (the role's path stays); request() makes no AWS call, so it must not show a guessed ARN
    role = _unique("PathRole")
    boto3.client("iam").create_role(RoleName=role, Path="/service-role/", AssumeRolePolicyDocument="{}")
    est = PyTorch(**{**kwargs, "role": role})
    shown = est.request("s3://data-bucket/train", region="us-east-1")["RoleArn"]
    assert shown == f"<resolved at submit by IAM GetRole: arn:aws:iam::<account>:role/[<path>/]{role}>"
    assert f"role/{role}" not in shown  # the old display, which fit() contradicted
    job_name = _unique("pt-rolename")
    est.fit("s3://data-bucket/train", job_name=job_name, wait=False)
    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)["RoleArn"]
    assert described == f"arn:aws:iam::{MOTO_ACCOUNT}:role/service-role/{role}"
    # the marker's template, filled with what only AWS knew, is what was sent
    assert shown[len("<resolved at submit by IAM GetRole: "):-1].replace("<account>", MOTO_ACCOUNT) \
        .replace("[<path>/]", "service-role/") == described
    # an ARN is shown and sent as given
    arn = f"arn:aws:iam::{MOTO_ACCOUNT}:role/service-role/{role}"
    est = PyTorch(**{**kwargs, "role": arn})
    assert est.request("s3://data-bucket/train", region="us-east-1")["RoleArn"] == arn
    job_name = _unique("pt-rolearn")
    est.fit("s3://data-bucket/train", job_name=job_name, wait=False)
    assert boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)["RoleArn"] == arn
