"""Schemas (pydantic) and validation of everything a user writes: estimator arguments, distribution, job files.

Public API:
  validate_args(framework, args, *, source=None, base_dir=None, check_source=True) -> EstimatorArgs (subclass per framework)
  load_job_file(path) -> JobFile(path, framework, args, inputs, job_name)
  resolve(spec_or_job_file, framework=None, *, job_name=None) -> ResolvedJob
  normalize_inputs(inputs, *, instance_type=None, base_dir=None) -> dict[str, Channel]
All raise smdist_launcher.errors.ValidationError (every problem at once, each with a key path).
"""
from __future__ import annotations

from .catalog import known_instance_types, lookup as lookup_instance
from .distribution import Distribution
from .estimator_args import (
    ARGS_MODELS, EstimatorArgs, HuggingFaceArgs, MXNetArgs, PyTorchArgs, TensorFlowArgs, args_model_for,
)
from .inputs import ChannelSpec, normalize_inputs
from .job_file import JobFile, job_file_model, load_job_file, parse_job_file
from .resolve import default_job_name, resolve
from .resolved import InstanceInfo, ResolvedJob
from .smp_parameters import SMPParameters
from .validate import validate_args

__all__ = [
    "ARGS_MODELS", "ChannelSpec", "Distribution", "EstimatorArgs", "HuggingFaceArgs", "InstanceInfo", "JobFile", "MXNetArgs",
    "PyTorchArgs", "ResolvedJob", "SMPParameters", "TensorFlowArgs", "args_model_for", "default_job_name", "job_file_model",
    "known_instance_types", "load_job_file", "lookup_instance", "normalize_inputs", "parse_job_file", "resolve", "validate_args",
]
