"""What a SageMaker host gets is enough for the runtime: one emulated host (its /opt/ml built from the submitted job,
code only in S3) runs `python -m smdist_launcher.container` against the moto server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker.request import LAUNCHER_ENV, PLAN_ENV, PLAN_IN_ARCHIVE

from .aws_env import use_moto


def _host_root(root: Path, described: dict[str, Any]) -> None:
    """/opt/ml/input/config as SageMaker writes it on algo-1; code/ stays empty (the runtime fetches the archive)."""
    config = root / "input" / "config"
    config.mkdir(parents=True)
    resource = described["ResourceConfig"]
    (config / "hyperparameters.json").write_text(json.dumps(described["HyperParameters"]))
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": "algo-1", "current_instance_type": resource["InstanceType"], "hosts": ["algo-1"],
        "current_group_name": "homogeneousCluster", "network_interface_name": "eth0",
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": resource["InstanceType"],
                             "hosts": ["algo-1"]}]}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        c["ChannelName"]: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                           "RecordWrapperType": "None"}
        for c in described["InputDataConfig"]}))


# On SageMaker /opt/ml/code is empty at start: the runtime must unpack the archive to find the shipped plan.
def test_runtime_finds_the_plan_in_the_uploaded_code(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                    kwargs: dict[str, Any], tmp_path: Path) -> None:
    use_moto(monkeypatch, moto_endpoint)
    code = Path(kwargs["source_dir"])
    (code / "train.py").write_text("import os\n"
                                   "print('token ok' if os.environ.get('HF_TOKEN') == 'hf-secret' else 'no token')\n"
                                   "open(os.path.join(os.environ['SM_MODEL_DIR'], 'model.txt'), 'w').write('m')\n")
    est = PyTorch(**{**kwargs, "instance_type": "ml.c5.xlarge", "instance_count": 1, "distribution": None})
    job_name = f"handoff-{time.monotonic_ns() % 10**12}"
    est.fit("s3://data-bucket/train", job_name=job_name, logs=False)
    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)

    root = tmp_path / "opt" / "ml"
    _host_root(root, described)
    # SageMaker passes the request's Environment to the container; /opt/ml is <root> here
    plan_path = LAUNCHER_ENV[PLAN_ENV].replace("/opt/ml", str(root))
    assert plan_path == str(root / "code" / PLAN_IN_ARCHIVE)
    env = {**os.environ, "HF_TOKEN": "hf-secret", "MODE": "fast", PLAN_ENV: plan_path}
    proc = subprocess.run([sys.executable, "-m", "smdist_launcher.container", "--root", str(root), "--no-install"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "token ok" in proc.stdout
    assert (root / "output" / "success").exists() and (root / "model" / "model.txt").read_text() == "m"
