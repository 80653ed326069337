"""Estimators for the SageMaker backend tests; the moto server comes from tests/backends/conftest.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROLE = "arn:aws:iam::111122223333:role/Train"


@pytest.fixture()
def code_dir(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('hello from train.py')\n")
    (code / "pkg" / "model.py").write_text("X = 1\n")
    for ignored in (".git", "__pycache__", ".ipynb_checkpoints"):
        (code / ignored).mkdir()
        (code / ignored / "junk").write_text("x")
    return code


@pytest.fixture()
def kwargs(code_dir: Path) -> dict[str, Any]:
    return dict(entry_point="train.py", source_dir=str(code_dir), role=ROLE, instance_type="ml.p4d.24xlarge",
                instance_count=2, framework_version="2.3", py_version="py311", hyperparameters={"epochs": 2},
                distribution={"torch_distributed": {"enabled": True}},
                environment={"HF_TOKEN": "hf-secret", "MODE": "fast"})
