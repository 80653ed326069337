from __future__ import annotations

from pathlib import Path

import pytest

JOB = """\
framework: pytorch
base_job_name: cli-test
entry_point: train.py
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
hyperparameters:
  epochs: 2
distribution:
  torch_distributed:
    enabled: true
"""


SAGEMAKER_JOB = """\
framework: pytorch
base_job_name: req-test
entry_point: train.py
role: arn:aws:iam::111122223333:role/Train
instance_type: ml.p4d.24xlarge
instance_count: 2
framework_version: "2.3"
py_version: py311
environment: {HF_TOKEN: hf_secret_value, MODE: fast}
distribution: {torch_distributed: {enabled: true}}
inputs: {train: s3://bucket/train}
"""


def _write_job(folder: Path, name: str, text: str) -> Path:
    (folder / "train.py").write_text("print('hi')\n")
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    """A valid job file (2 local hosts, torchrun) next to its train.py."""
    return _write_job(tmp_path, "job.yaml", JOB)


@pytest.fixture
def sagemaker_job(tmp_path: Path) -> Path:
    """A valid job file for SageMaker (2 × ml.p4d.24xlarge, torchrun, a secret in its environment)."""
    return _write_job(tmp_path, "sm.yaml", SAGEMAKER_JOB)
