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


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    """A valid job file (2 local hosts, torchrun) next to its train.py."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path
