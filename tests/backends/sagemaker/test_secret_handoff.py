"""Secret hyperparameters on SageMaker: the request carries them (the API needs them), the archive's plan does not,
and the runtime gives the script the values SageMaker wrote into hyperparameters.json."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker.request import LAUNCHER_ENV, PLAN_ENV

from .aws_env import use_moto
from .test_container_handoff import _host_root

SECRET = "hub-SeCrEt-31337"


def test_secret_hyperparameter_reaches_only_the_script(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                       kwargs: dict[str, Any], tmp_path: Path) -> None:
    use_moto(monkeypatch, moto_endpoint)
    code = Path(kwargs["source_dir"])
    (code / "train.py").write_text(
        "import hashlib, sys\nv = sys.argv[sys.argv.index('--hub_token') + 1]\n"
        "print('secret ok' if hashlib.sha256(v.encode()).hexdigest() == "
        f"{__import__('hashlib').sha256(SECRET.encode()).hexdigest()!r} else 'bad')\n")
    est = PyTorch(**{**kwargs, "instance_type": "ml.c5.xlarge", "instance_count": 1, "distribution": None,
                     "hyperparameters": {"hub_token": SECRET, "epochs": 1}})
    job_name = f"secret-{time.monotonic_ns() % 10**12}"
    est.fit("s3://data-bucket/train", job_name=job_name, logs=False)
    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    assert json.loads(described["HyperParameters"]["hub_token"]) == SECRET

    bucket, key = json.loads(described["HyperParameters"]["sagemaker_submit_directory"])[5:].split("/", 1)
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        plan_text = tar.extractfile(".smdist/launchplan.json").read().decode()
    assert SECRET not in plan_text and "***REDACTED***" in plan_text

    root = tmp_path / "opt" / "ml"
    _host_root(root, described)
    env = {**os.environ, "HF_TOKEN": "hf-secret", PLAN_ENV: LAUNCHER_ENV[PLAN_ENV].replace("/opt/ml", str(root))}
    proc = subprocess.run([sys.executable, "-m", "smdist_launcher.container", "--root", str(root), "--no-install"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "secret ok" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr  # the "running: ..." line shows the marker
    assert SECRET not in (root / "run" / "environment.json").read_text()
