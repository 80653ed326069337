"""The /opt/ml contract of SageMaker training containers: layout, config files, SM_* environment.

Runtime-safe: stdlib only (the GPU machines have no pydantic)."""
from __future__ import annotations

from .config_files import (
    input_data_config_for,
    read_hyperparameters_raw,
    read_input_data_config,
    read_json,
    read_resource_config,
    resource_config_for,
    write_json,
)
from .environment import build_training_env, encode_env_value, to_env_vars, training_environment
from .host_config import redacted_plan, write_host_config
from .hyperparameters import decode_hyperparameters, encode_hyperparameters, split_hyperparameters, to_cmd_args
from .layout import DEFAULT_ROOT, MLPaths, resolve_root

__all__ = [
    "DEFAULT_ROOT", "MLPaths", "build_training_env", "decode_hyperparameters", "encode_env_value",
    "encode_hyperparameters", "input_data_config_for", "read_hyperparameters_raw", "read_input_data_config",
    "read_json", "read_resource_config", "redacted_plan", "resolve_root", "resource_config_for",
    "split_hyperparameters", "to_cmd_args", "to_env_vars", "training_environment", "write_host_config", "write_json",
]
