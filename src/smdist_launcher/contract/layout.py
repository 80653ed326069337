"""The /opt/ml directory layout of a SageMaker training container, under any root."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = "/opt/ml"
ROOT_ENV = "SMDIST_ML_ROOT"


def resolve_root(root: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """--root wins, then $SMDIST_ML_ROOT, then /opt/ml."""
    env = os.environ if environ is None else environ
    return Path(root or env.get(ROOT_ENV) or DEFAULT_ROOT)


@dataclass(frozen=True)
class MLPaths:
    """Every path of the contract. Pure: nothing is created here."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def input_dir(self) -> Path:
        return self.root / "input"

    @property
    def input_config_dir(self) -> Path:
        return self.input_dir / "config"

    @property
    def input_data_dir(self) -> Path:
        return self.input_dir / "data"

    @property
    def resource_config_file(self) -> Path:
        return self.input_config_dir / "resourceconfig.json"

    @property
    def hyperparameters_file(self) -> Path:
        return self.input_config_dir / "hyperparameters.json"

    @property
    def input_data_config_file(self) -> Path:
        return self.input_config_dir / "inputdataconfig.json"

    @property
    def plan_file(self) -> Path:
        return self.input_config_dir / "launchplan.json"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def output_dir(self) -> Path:
        return self.root / "output"

    @property
    def output_data_dir(self) -> Path:
        return self.output_dir / "data"

    @property
    def output_intermediate_dir(self) -> Path:
        return self.output_dir / "intermediate"

    @property
    def success_file(self) -> Path:
        return self.output_dir / "success"

    @property
    def failure_file(self) -> Path:
        return self.output_dir / "failure"

    @property
    def failure_json_file(self) -> Path:
        return self.output_dir / "failure.json"

    @property
    def code_dir(self) -> Path:
        return self.root / "code"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def run_dir(self) -> Path:
        """Runtime state of our own (not SageMaker's): environment.json, rsh.json."""
        return self.root / "run"

    @property
    def environment_file(self) -> Path:
        return self.run_dir / "environment.json"

    @property
    def rsh_file(self) -> Path:
        return self.run_dir / "rsh.json"

    def channel_dir(self, name: str) -> Path:
        return self.input_data_dir / name

    def all_dirs(self) -> list[Path]:
        return [self.input_config_dir, self.input_data_dir, self.model_dir, self.output_data_dir,
                self.output_intermediate_dir, self.code_dir, self.checkpoints_dir, self.run_dir]
