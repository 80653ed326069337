"""The smdist image as SDK v3's `training_image`: the official SDK's MPI job through `smdist serve --backend docker`
finds what v3's sm_train.sh and MPI driver use (python3/pip3 on PATH, paramiko, an sshd on port 22 with root key auth
between hosts), each container with its own /opt/ml."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from serve.conftest import REGION, running_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # the first run builds the base image

def test_the_official_sdk_v3_runs_mpi_in_the_smdist_image(use_engine: Any, smdist_image: str, moto_endpoint: str,
                                                          tmp_path: Path, sdk_v3_python: Path) -> None:
    """Unchanged `ModelTrainer(distributed=MPI(...))` with the smdist image: v3's sm_train.sh and MPI driver, sshd on
    port 22 in every container, mpirun over ssh, ranks on both hosts."""
    from serve.test_sdk_v3_client import MPI_CASE, ClientRun, _client_env, _source

    environ = {"DOCKER_HOST": use_engine.env["DOCKER_HOST"], "SMDIST_DOCKER_IMAGE": smdist_image}
    with running_serve(moto_endpoint, tmp_path, "docker", environ=environ) as served:
        s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="v3-docker-mpi")
        script, spec = MPI_CASE
        source = _source(tmp_path / "src", script)
        out, printed = ClientRun(str(sdk_v3_python), _client_env(served, moto_endpoint, tmp_path),
                                 {"bucket": "v3-docker-mpi", "source_dir": str(source), "entry_script": "train.py",
                                  "image": smdist_image, "base_job_name": "v3-docker-mpi", **spec}, tmp_path).result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    assert "mpi rank 0 of 2 on algo-1" in printed and "mpi rank 1 of 2 on algo-2" in printed
    assert use_engine.containers() == []
