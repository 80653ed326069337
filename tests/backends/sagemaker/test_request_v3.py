"""The CreateTrainingJob request in SageMaker SDK v3's wire shape (backends/sagemaker/request_v3.py). Pure: no AWS."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher import ModelTrainer, PyTorch
from smdist_launcher.backends.sagemaker.request_v3 import (
    CONTAINER_ARGUMENTS,
    build_v3_request,
    serialize_hyperparameter,
)
from smdist_launcher.cli.main import main
from smdist_launcher.errors import ValidationError
from smdist_launcher.plan.model import REDACTED
from smdist_launcher.train.configs import Compute, InputData, SourceCode
from smdist_launcher.train.distributed import MPI, SMP, Torchrun

from .conftest import ROLE

IMAGE = "658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _trainer(code_dir: Path, **more: Any) -> ModelTrainer:
    return ModelTrainer(training_image=IMAGE, role=ROLE, base_job_name="llama",
                        source_code=SourceCode(source_dir=str(code_dir), entry_script="train.py"),
                        compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2),
                        hyperparameters={"epochs": 2, "optimizer": "sgd", "layers": [1, 2]}, **more)


def test_smp_job_as_v3_sends_it(code_dir: Path) -> None:
    trainer = _trainer(code_dir, distributed=Torchrun(smp=SMP(tensor_parallel_degree=4, hybrid_shard_degree=2)),
                       environment={"HF_TOKEN": "hf-secret"})
    plan = trainer.plan([InputData(channel_name="train", data_source="s3://data/train")], job_name="llama-1")
    request = build_v3_request(plan, trainer.spec, region="us-west-2", account="111122223333")
    bucket = "s3://sagemaker-us-west-2-111122223333"
    assert request == {
        "TrainingJobName": "llama-1",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["/bin/bash"],
                                   "ContainerArguments": ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh "
                                                                "&& /opt/ml/input/data/sm_drivers/sm_train.sh"]},
        "RoleArn": ROLE,
        "HyperParameters": {"epochs": "2", "optimizer": "sgd", "layers": "[1, 2]",
                            "mp_parameters": '{"hybrid_shard_degree": 2, "tensor_parallel_degree": 4}'},
        "InputDataConfig": [
            {"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": "s3://data/train", "S3DataDistributionType": "FullyReplicated"}},
             "InputMode": "File"},
            *({"ChannelName": name, "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"{bucket}/llama/llama-1/input/{name}",
                "S3DataDistributionType": "FullyReplicated"}}, "InputMode": "File"} for name in ("code", "sm_drivers")),
        ],
        "OutputDataConfig": {"S3OutputPath": f"{bucket}/llama", "CompressionType": "GZIP"},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "Environment": {"HF_TOKEN": "hf-secret"},
    }


def test_no_sagemaker_keys_no_launcher_environment_and_secrets_redacted_for_display(code_dir: Path) -> None:
    trainer = _trainer(code_dir, distributed=MPI(process_count_per_node=8), environment={"HF_TOKEN": "hf-secret"})
    shown = trainer.request(wire="v3", region="us-west-2")
    assert not [k for k in shown["HyperParameters"] if k.startswith("sagemaker_")]
    assert "mp_parameters" not in shown["HyperParameters"]
    assert shown["Environment"] == {"HF_TOKEN": REDACTED}
    assert shown["AlgorithmSpecification"]["ContainerArguments"] == CONTAINER_ARGUMENTS
    ours = trainer.request(region="us-west-2")  # the default: what train() sends to our image
    assert "ContainerEntrypoint" not in ours["AlgorithmSpecification"] and "SMDIST_PLAN" in ours["Environment"]


def test_hyperparameters_serialize_like_v3() -> None:
    assert serialize_hyperparameter("sgd") == "sgd"
    assert serialize_hyperparameter(2) == "2" and serialize_hyperparameter(True) == "true"
    assert serialize_hyperparameter({"a": 1}) == '{"a": 1}'


def test_what_v3_cannot_express_is_refused_with_the_reason(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}})
    from smdist_launcher.backends.sagemaker.request_v3 import render_v3_request

    with pytest.raises(ValidationError) as info:
        render_v3_request(est.submission(est.plan()))
    assert "cannot express SMDDP's smddprun" in str(info.value)


def test_a_v2_job_file_as_v3_request_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    job = EXAMPLES / "torch_distributed" / "job.yaml"
    assert main(["plan", str(job), "--request", "--wire", "v3", "--region", "us-west-2", "--format", "json"]) == 0
    request = json.loads(capsys.readouterr().out)
    assert request["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert [c["ChannelName"] for c in request["InputDataConfig"]][-2:] == ["code", "sm_drivers"]
    assert main(["plan", str(job), "--wire", "v3"]) == 2
    assert "--wire: is only used with --request" in capsys.readouterr().err


# Run in the SDK v3 venv: every AWS call answered in-process (botocore's one entry point), each CreateTrainingJob's
# parameters captured; nothing leaves the machine. The same jobs as _jobs() below, written with v3's own classes.
_CAPTURE = """
import json, sys
import botocore.client

ACCOUNT = "111122223333"
captured = {}


class Sent(Exception):
    pass


def answer(self, operation, params):
    if operation == "CreateTrainingJob":
        captured["request"] = params
        raise Sent()
    return {"GetCallerIdentity": {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/u", "UserId": "u"},
            "ListBuckets": {"Buckets": [{"Name": f"sagemaker-us-west-2-{ACCOUNT}"}]},
            "GetBucketLocation": {"LocationConstraint": "us-west-2"},
            "PutObject": {"ETag": '"x"'}}.get(operation, {})


botocore.client.BaseClient._make_api_call = answer
from sagemaker.core.shapes import InstanceGroup, OutputDataConfig
from sagemaker.train.configs import Compute, InputData, SourceCode, StoppingCondition
from sagemaker.train.distributed import MPI, SMP, Torchrun
from sagemaker.train.model_trainer import ModelTrainer

src, image = sys.argv[1], sys.argv[2]
p4d = Compute(instance_type="ml.p4d.24xlarge", instance_count=2)
jobs = {
    "smp": dict(distributed=Torchrun(smp=SMP(tensor_parallel_degree=4, hybrid_shard_degree=2)), compute=p4d,
                environment={"MODE": "fast"}),
    "torchrun": dict(distributed=Torchrun(process_count_per_node=8), compute=p4d,
                     stopping_condition=StoppingCondition(max_runtime_in_seconds=7200)),
    "mpi": dict(distributed=MPI(process_count_per_node=8, mpi_additional_options=["-x", "NCCL_DEBUG=WARN"]),
                compute=p4d, output_data_config=OutputDataConfig(s3_output_path="s3://out-bucket/runs")),
    "groups": dict(compute=Compute(instance_groups=[
        InstanceGroup(instance_group_name="data", instance_type="ml.c5.2xlarge", instance_count=1),
        InstanceGroup(instance_group_name="train", instance_type="ml.p4d.24xlarge", instance_count=2)])),
}
out = {}
for name, kwargs in jobs.items():
    trainer = ModelTrainer(training_image=image, role=f"arn:aws:iam::{ACCOUNT}:role/Train", base_job_name=name,
                           source_code=SourceCode(source_dir=src, entry_script="train.py"),
                           hyperparameters={"epochs": 2, "optimizer": "sgd", "layers": [1, 2]}, **kwargs)
    try:
        trainer.train(input_data_config=[InputData(channel_name="train", data_source="s3://data-bucket/train")],
                      wait=False)
    except Sent:
        pass
    out[name] = captured.pop("request")
print(json.dumps(out))
"""


def _jobs() -> dict[str, dict[str, Any]]:
    from smdist_launcher.train.configs import InstanceGroup, OutputDataConfig, StoppingCondition

    p4d = Compute(instance_type="ml.p4d.24xlarge", instance_count=2)
    return {
        "smp": dict(distributed=Torchrun(smp=SMP(tensor_parallel_degree=4, hybrid_shard_degree=2)), compute=p4d,
                    environment={"MODE": "fast"}),
        "torchrun": dict(distributed=Torchrun(process_count_per_node=8), compute=p4d,
                         stopping_condition=StoppingCondition(max_runtime_in_seconds=7200)),
        "mpi": dict(distributed=MPI(process_count_per_node=8, mpi_additional_options=["-x", "NCCL_DEBUG=WARN"]),
                    compute=p4d, output_data_config=OutputDataConfig(s3_output_path="s3://out-bucket/runs")),
        "groups": dict(compute=Compute(instance_groups=[
            InstanceGroup(instance_group_name="data", instance_type="ml.c5.2xlarge", instance_count=1),
            InstanceGroup(instance_group_name="train", instance_type="ml.p4d.24xlarge", instance_count=2)])),
    }


def test_the_official_v3_sends_what_we_say_it_sends(code_dir: Path, tmp_path: Path, sdk_v3_python: Path) -> None:
    """The same jobs through the official `sagemaker` 3.x (its venv: the `sdk_v3_python` fixture builds or waits for
    it, whichever test runs first) and through build_v3_request: the same CreateTrainingJob requests, field by field."""
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_DEFAULT_REGION="us-west-2", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
               SAGEMAKER_VALIDATE_ROLE="false", HOME=str(tmp_path))
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311"
    done = subprocess.run([str(sdk_v3_python), "-c", _CAPTURE, str(code_dir), image], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    sent = json.loads(done.stdout.strip().splitlines()[-1])
    for name, kwargs in _jobs().items():
        theirs = sent[name]
        trainer = ModelTrainer(training_image=image, role="arn:aws:iam::111122223333:role/Train", base_job_name=name,
                               source_code=SourceCode(source_dir=str(code_dir), entry_script="train.py"),
                               hyperparameters={"epochs": 2, "optimizer": "sgd", "layers": [1, 2]}, **kwargs)
        plan = trainer.plan([InputData(channel_name="train", data_source="s3://data-bucket/train")],
                            job_name=theirs["TrainingJobName"])
        ours = build_v3_request(plan, trainer.spec, region="us-west-2", account="111122223333")
        assert ours == theirs, name
