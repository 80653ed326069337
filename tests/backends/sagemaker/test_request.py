"""The CreateTrainingJob request, by value. Pure: no AWS."""
from __future__ import annotations

from typing import Any

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker import build_request, render_request
from smdist_launcher.backends.sagemaker.locations import submit_uri
from smdist_launcher.backends.sagemaker.request import JobTarget, plan_for_container, target_for
from smdist_launcher.plan.model import REDACTED

from .conftest import ROLE

TARGET = JobTarget(region="us-west-2", role_arn=ROLE, output_path="s3://out/prefix",
                   submit_uri="s3://out/job-1/source/sourcedir.tar.gz")


def test_request_by_value(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    plan = est.plan({"train": "s3://data/train", "test": "s3://data/test"}, job_name="job-1")
    request = build_request(plan, est.spec, TARGET)
    assert request == {
        "TrainingJobName": "job-1",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3-gpu-py311",
            "TrainingInputMode": "File", "EnableSageMakerMetricsTimeSeries": True},
        "RoleArn": ROLE,
        "HyperParameters": {**plan.sagemaker_hyperparameters,
                            "sagemaker_submit_directory": '"s3://out/job-1/source/sourcedir.tar.gz"',
                            "sagemaker_region": '"us-west-2"'},
        "InputDataConfig": [
            {"ChannelName": name, "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://data/{name}", "S3DataDistributionType": "FullyReplicated"}}}
            for name in ("test", "train")],
        "OutputDataConfig": {"S3OutputPath": "s3://out/prefix"},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "Environment": {"HF_TOKEN": "hf-secret", "MODE": "fast", "SMDIST_PLAN": "/opt/ml/code/.smdist/launchplan.json"},
    }
    assert request["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert request["HyperParameters"]["epochs"] == "2"


def test_every_optional_argument(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "image_uri": "123.dkr.ecr.us-west-2.amazonaws.com/mine:1", "volume_size": 500,
                     "max_run": 3600, "use_spot_instances": True, "max_wait": 7200, "volume_kms_key": "vk",
                     "output_kms_key": "ok", "checkpoint_s3_uri": "s3://ckpt/p",
                     "checkpoint_local_path": "/opt/ml/checkpoints",
                     "subnets": ["subnet-1"], "security_group_ids": ["sg-1"], "tags": {"team": "ml"},
                     "keep_alive_period_in_seconds": 600, "enable_network_isolation": True,
                     "encrypt_inter_container_traffic": True, "max_retry_attempts": 3, "disable_profiler": True,
                     "input_mode": "FastFile", "model_uri": "s3://models/m.tar.gz", "disable_output_compression": True,
                     "metric_definitions": [{"Name": "loss", "Regex": "loss=(\\S+)"}]})
    plan = est.plan("s3://data/train", job_name="job-1")
    request = build_request(plan, est.spec, TARGET)
    assert request["AlgorithmSpecification"]["TrainingImage"] == "123.dkr.ecr.us-west-2.amazonaws.com/mine:1"
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == [{"Name": "loss", "Regex": "loss=(\\S+)"}]
    assert request["ResourceConfig"] == {"VolumeSizeInGB": 500, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge",
                                         "VolumeKmsKeyId": "vk", "KeepAlivePeriodInSeconds": 600}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert request["OutputDataConfig"] == {"S3OutputPath": "s3://out/prefix", "KmsKeyId": "ok",
                                           "CompressionType": "NONE"}
    assert request["CheckpointConfig"] == {"S3Uri": "s3://ckpt/p", "LocalPath": "/opt/ml/checkpoints"}
    assert request["VpcConfig"] == {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]}
    assert request["Tags"] == [{"Key": "team", "Value": "ml"}]
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 3}
    assert request["ProfilerConfig"] == {"DisableProfiler": True}
    assert all(request[k] is True for k in ("EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",
                                            "EnableManagedSpotTraining"))
    # network isolation: the container cannot read S3, so the code comes as channel "code"
    names = [c["ChannelName"] for c in request["InputDataConfig"]]
    assert names == ["training", "model", "code"]
    assert request["InputDataConfig"][1]["ContentType"] == "application/x-sagemaker-model"
    assert request["InputDataConfig"][2]["DataSource"]["S3DataSource"]["S3Uri"] == TARGET.submit_uri
    assert request["HyperParameters"]["sagemaker_submit_directory"] == '"/opt/ml/input/data/code/sourcedir.tar.gz"'


def test_render_redacts_secrets_and_marks_unknowns(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "role": "Train", "hyperparameters": {"api_key": "k", "epochs": 2}})
    plan = est.plan("s3://data/train", job_name="job-1")
    shown = render_request(plan, est.spec)
    assert shown["Environment"]["HF_TOKEN"] == REDACTED and shown["Environment"]["MODE"] == "fast"
    assert shown["HyperParameters"]["api_key"] == REDACTED and shown["HyperParameters"]["epochs"] == "2"
    # a role name: submission asks IAM GetRole (the role's path stays), so the display says so
    assert shown["RoleArn"] == "<resolved at submit by IAM GetRole: arn:aws:iam::<account>:role/[<path>/]Train>"
    assert shown["OutputDataConfig"]["S3OutputPath"] == "s3://sagemaker-<region>-<account>/"
    assert "hf-secret" not in repr(shown)
    assert render_request(plan, est.spec, region="us-west-2", account="999988887777")["RoleArn"] == \
        "<resolved at submit by IAM GetRole: arn:aws:iam::<account>:role/[<path>/]Train>"
    arn = "arn:aws:iam::999988887777:role/service-role/Train"
    by_arn = PyTorch(**{**kwargs, "role": arn})
    assert render_request(by_arn.plan("s3://data/train", job_name="job-1"), by_arn.spec)["RoleArn"] == arn


def test_locations_like_the_sdk(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    plan = est.plan("s3://data/train", job_name="job-1")
    target = target_for(plan, est.spec, region="eu-west-1", account="999988887777")
    assert target.output_path == "s3://sagemaker-eu-west-1-999988887777/"
    assert target.submit_uri == "s3://sagemaker-eu-west-1-999988887777/job-1/source/sourcedir.tar.gz"
    assert submit_uri("j", code_location="s3://code/pre/fix", output="s3://out/p") == "s3://code/pre/fix/j/source/sourcedir.tar.gz"
    assert submit_uri("j", code_location=None, output="s3://out/p") == "s3://out/j/source/sourcedir.tar.gz"
    s3_code = PyTorch(**{**kwargs, "source_dir": "s3://code/src.tar.gz"})
    assert target_for(s3_code.plan("s3://data/train", job_name="j"), s3_code.spec, region="eu-west-1",
                      account="1").submit_uri == "s3://code/src.tar.gz"


def test_container_plan_has_the_submitted_hyperparameters(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    plan = est.plan("s3://data/train", job_name="job-1")
    request = build_request(plan, est.spec, TARGET)
    shipped = plan_for_container(plan, request)
    assert shipped.sagemaker_hyperparameters == request["HyperParameters"]
    assert "hf-secret" not in shipped.to_json()
