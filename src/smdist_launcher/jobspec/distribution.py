"""The `distribution` argument: every key SageMaker's estimators accept (sagemaker-sdk.md §1), as strict models.

A missing `enabled` is kept as None (SageMaker reads it as false and silently ignores the block); the rules report it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from .smp_parameters import SMPParameters
from .strict_model import SpecModel


class Toggle(SpecModel):
    enabled: bool | None = None


class TorchDistributed(Toggle):
    """torchrun on every host."""


class ParameterServer(Toggle):
    """TensorFlow / MXNet parameter-server layout."""


class MultiWorkerMirroredStrategy(Toggle):
    """tf.distribute.MultiWorkerMirroredStrategy (TensorFlow ≥ 2.9)."""


class PyTorchXLA(Toggle):
    """PyTorch/XLA through SageMaker Training Compiler."""


class PyTorchDDP(Toggle):
    """mpirun + smddprun (SageMaker rewrites it to smdistributed.dataparallel, which takes custom_mpi_options)."""

    custom_mpi_options: str | None = None


class MPI(Toggle):
    processes_per_host: int | None = Field(default=None, ge=1)
    custom_mpi_options: str | None = None


class DataParallel(Toggle):
    custom_mpi_options: str | None = None


class ModelParallel(Toggle):
    parameters: SMPParameters | None = None

    @field_validator("parameters", mode="before")
    @classmethod
    def _load_parameters_file(cls, value: Any, info: ValidationInfo) -> Any:
        # SageMaker also takes a path to a JSON file here; read it so that its keys are validated like inline ones.
        if not isinstance(value, str):
            return value
        return read_parameters_file(value, (info.context or {}).get("base_dir") or os.getcwd())


def read_parameters_file(value: str, base: str) -> dict[str, Any]:
    """The SMP parameters in the JSON file `value` (relative to `base`); ValueError says what is wrong."""
    try:
        text = Path(base, value).read_text(encoding="utf-8")
    except (OSError, ValueError):
        raise ValueError(
            f"expected a mapping of SMP parameters or a path to an existing JSON file, got {value!r} "
            f"(looked in {base})"
        ) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"cannot parse {value!r} as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"the JSON file {value!r} must hold an object of SMP parameters, got {type(data).__name__}")
    return data


class SMDistributed(SpecModel):
    dataparallel: DataParallel | None = None
    modelparallel: ModelParallel | None = None


class Distribution(SpecModel):
    pytorchddp: PyTorchDDP | None = None
    torch_distributed: TorchDistributed | None = None
    smdistributed: SMDistributed | None = None
    mpi: MPI | None = None
    parameter_server: ParameterServer | None = None
    multi_worker_mirrored_strategy: MultiWorkerMirroredStrategy | None = None
    pytorchxla: PyTorchXLA | None = None
    instance_groups: list[str] | None = None

    # ---- convenient reads ------------------------------------------------------------------------
    def on(self, key: str) -> bool:
        """True when the top-level block `key` is present with enabled: true."""
        block = getattr(self, key, None)
        return bool(block is not None and getattr(block, "enabled", None))

    @property
    def dataparallel_on(self) -> bool:
        sm = self.smdistributed
        return bool(sm and sm.dataparallel and sm.dataparallel.enabled)

    @property
    def modelparallel_on(self) -> bool:
        sm = self.smdistributed
        return bool(sm and sm.modelparallel and sm.modelparallel.enabled)

    @property
    def smp_parameters(self) -> SMPParameters:
        sm = self.smdistributed
        params = sm.modelparallel.parameters if sm and sm.modelparallel else None
        return params or SMPParameters()

    def normalized(self) -> dict[str, Any]:
        """The dict as the user meant it: only given keys, SMP parameters as a dict (a JSON file already read)."""
        return self.model_dump(exclude_unset=True)

    @field_validator("instance_groups")
    @classmethod
    def _one_group(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(value) != 1:
            raise ValueError(f"must name exactly one instance group, got {len(value)} (SageMaker: "
                             "'Distribution should only contain one instance group name')")
        return value
