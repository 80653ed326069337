"""The smdist image as SDK v3's `training_image`: a container-command job through `smdist serve --backend docker`
finds what v3's sm_train.sh and MPI driver use (python3/pip3 on PATH, our compat names, paramiko, an sshd on port 22
with root key auth between hosts), each container with its own /opt/ml."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from serve.conftest import REGION, running_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # the first run builds the base image

# v3's MPI driver in miniature: sshd -D on port 22 everywhere, the master reaches the worker by name as root with the
# image's key and releases it through a status file, as its driver does.
HOST_SCRIPT = r'''
set -e
command -v python3 >/dev/null && command -v pip3 >/dev/null
python3 -c "import paramiko, smdistributed.dataparallel"
echo "hps=$(cat /opt/ml/input/config/hyperparameters.json) job=$TRAINING_JOB_NAME"
/usr/sbin/sshd -D &
if [ "$(hostname)" = algo-1 ]; then
  for i in $(seq 200); do ssh -o BatchMode=yes algo-2 hostname > /tmp/peer 2>/dev/null && break; sleep 0.3; done
  echo "reached $(cat /tmp/peer) over ssh"
  ssh -o BatchMode=yes algo-2 touch /tmp/done.algo-1
else
  for i in $(seq 400); do [ -f /tmp/done.algo-1 ] && break; sleep 0.3; done
  [ -f /tmp/done.algo-1 ] && echo "released by algo-1"
fi
echo "$(hostname)" > /opt/ml/model/$(hostname).txt
'''


def test_a_v3_style_command_runs_in_the_smdist_image(use_engine: Any, smdist_image: str, moto_endpoint: str,
                                                     tmp_path: Path) -> None:
    environ = {"DOCKER_HOST": use_engine.env["DOCKER_HOST"], "SMDIST_DOCKER_IMAGE": smdist_image}
    with running_serve(moto_endpoint, tmp_path, "docker", environ=environ) as served:
        session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
        s3 = session.client("s3", endpoint_url=moto_endpoint)
        s3.create_bucket(Bucket="v3-docker")
        s3.put_object(Bucket="v3-docker", Key="input/code/train.py", Body=b"print('unused')\n")
        creds = dict(line.split(" = ", 1) for line in (tmp_path / "credentials").read_text().splitlines()
                     if " = " in line)
        sagemaker = boto3.client("sagemaker", endpoint_url=str(served), region_name=REGION,
                                 aws_access_key_id=creds["aws_access_key_id"],
                                 aws_secret_access_key=creds["aws_secret_access_key"])
        name = "v3-in-docker"
        sagemaker.create_training_job(
            TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/R",
            AlgorithmSpecification={"TrainingImage": smdist_image, "TrainingInputMode": "File",
                                    "ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": ["-c", HOST_SCRIPT]},
            HyperParameters={"epochs": "2"},
            InputDataConfig=[{"ChannelName": "code", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": "s3://v3-docker/input/code",
                "S3DataDistributionType": "FullyReplicated"}}}],
            OutputDataConfig={"S3OutputPath": "s3://v3-docker/output"},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
            StoppingCondition={"MaxRuntimeInSeconds": 600})
        deadline = time.monotonic() + 600
        while (done := sagemaker.describe_training_job(TrainingJobName=name))["TrainingJobStatus"] == "InProgress":
            assert time.monotonic() < deadline, done
            time.sleep(0.5)
        logs = {h: (served.jobs / name / "logs" / f"{h}.log").read_text() for h in ("algo-1", "algo-2")}
        assert done["TrainingJobStatus"] == "Completed", (done.get("FailureReason"), logs)
        assert "reached algo-2 over ssh" in logs["algo-1"] and "released by algo-1" in logs["algo-2"]
        assert f'hps={{"epochs": "2"}} job={name}' in logs["algo-1"]
        assert use_engine.containers() == []


def test_the_official_sdk_v3_runs_mpi_in_the_smdist_image(use_engine: Any, smdist_image: str, moto_endpoint: str,
                                                          tmp_path: Path) -> None:
    """Unchanged `ModelTrainer(distributed=MPI(...))` with the smdist image: v3's sm_train.sh and MPI driver, sshd on
    port 22 in every container, mpirun over ssh, ranks on both hosts."""
    from serve import sdk_v3_env
    from serve.test_sdk_v3_client import MPI_CASE, ClientRun, _client_env, _source

    if not sdk_v3_env.is_built():
        pytest.skip("the SDK v3 venv is not built (the serve tests build it)")
    environ = {"DOCKER_HOST": use_engine.env["DOCKER_HOST"], "SMDIST_DOCKER_IMAGE": smdist_image}
    with running_serve(moto_endpoint, tmp_path, "docker", environ=environ) as served:
        s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="v3-docker-mpi")
        script, spec = MPI_CASE
        source = _source(tmp_path / "src", script)
        out, printed = ClientRun(str(sdk_v3_env.python()), _client_env(served, moto_endpoint, tmp_path),
                                 {"bucket": "v3-docker-mpi", "source_dir": str(source), "entry_script": "train.py",
                                  "image": smdist_image, "base_job_name": "v3-docker-mpi", **spec}, tmp_path).result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    assert "mpi rank 0 of 2 on algo-1" in printed and "mpi rank 1 of 2 on algo-2" in printed
    assert use_engine.containers() == []
