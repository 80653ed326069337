"""Shared fixtures for spec tests: a source folder with a training script, and a valid argument set to mutate."""
from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher.errors import ValidationError


@pytest.fixture(scope="session")
def code_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("code")
    (root / "train.py").write_text("print('hi')\n")
    (root / "run.sh").write_text("echo hi\n")
    return root


BASE_ARGS: dict[str, Any] = {
    "entry_point": "train.py",
    "role": "arn:aws:iam::111122223333:role/Train",
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
    "framework_version": "2.3",
    "py_version": "py311",
    "hyperparameters": {"epochs": 2, "lr": 0.1},
}


@pytest.fixture()
def args(code_dir: Path) -> dict[str, Any]:
    """A valid PyTorch argument set (a fresh copy per test)."""
    return {**copy.deepcopy(BASE_ARGS), "source_dir": str(code_dir)}


def error_paths(exc: ValidationError) -> list[str]:
    return sorted(e.path for e in exc.errors)


def problems(framework: str, args: dict[str, Any], **kw: Any) -> list[str]:
    """The error paths validate_args reports ([] when valid)."""
    from smdist_launcher.jobspec import validate_args

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validate_args(framework, args, **kw)
    except ValidationError as exc:
        return error_paths(exc)
    return []


def messages(framework: str, args: dict[str, Any], **kw: Any) -> dict[str, str]:
    from smdist_launcher.jobspec import validate_args

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validate_args(framework, args, **kw)
    except ValidationError as exc:
        return {e.path: e.message for e in exc.errors}
    return {}
