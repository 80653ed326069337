"""Schemas (pydantic) and validation of everything a user writes: estimator arguments, distribution, job files.

Public API:
  validate_args(framework, args, *, source=None, base_dir=None, check_source=True)
      -> EstimatorArgs (subclass per framework)
  load_job_file(path) -> JobFile(path, framework, args, inputs, job_name)
  resolve(spec_or_job_file, framework=None, *, job_name=None) -> ResolvedJob
  normalize_inputs(inputs, *, instance_type=None, base_dir=None) -> dict[str, Channel]
All raise smdist_launcher.errors.ValidationError (every problem at once, each with a key path).

The functions are imported with the package; the schemas (pydantic models) on first access, through __getattr__:
the estimators import this package, and `from smdist_launcher import PyTorch` must not pay for pydantic.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .catalog import known_instance_types, lookup as lookup_instance
from .inputs import normalize_inputs
from .job_file import JobFile, job_file_model, load_job_file, parse_job_file
from .resolve import default_job_name, resolve
from .validate import validate_args

_SCHEMAS = {
    "ARGS_MODELS": "estimator_args", "EstimatorArgs": "estimator_args", "HuggingFaceArgs": "estimator_args",
    "MXNetArgs": "estimator_args", "PyTorchArgs": "estimator_args", "TensorFlowArgs": "estimator_args",
    "args_model_for": "estimator_args", "ChannelSpec": "channel_spec", "Distribution": "distribution",
    "InstanceInfo": "resolved", "ResolvedJob": "resolved", "SMPParameters": "smp_parameters",
}

if TYPE_CHECKING:  # pragma: no cover
    from .channel_spec import ChannelSpec
    from .distribution import Distribution
    from .estimator_args import (
        ARGS_MODELS,
        EstimatorArgs,
        HuggingFaceArgs,
        MXNetArgs,
        PyTorchArgs,
        TensorFlowArgs,
        args_model_for,
    )
    from .resolved import InstanceInfo, ResolvedJob
    from .smp_parameters import SMPParameters

__all__ = [
    "ARGS_MODELS", "ChannelSpec", "Distribution", "EstimatorArgs", "HuggingFaceArgs", "InstanceInfo", "JobFile",
    "MXNetArgs", "PyTorchArgs", "ResolvedJob", "SMPParameters", "TensorFlowArgs", "args_model_for", "default_job_name",
    "job_file_model", "known_instance_types", "load_job_file", "lookup_instance", "normalize_inputs", "parse_job_file",
    "resolve", "validate_args",
]


def __getattr__(name: str) -> Any:
    module = _SCHEMAS.get(name)
    if module is None:  # also how `from smdist_launcher.jobspec import <submodule>` falls through to the import
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
