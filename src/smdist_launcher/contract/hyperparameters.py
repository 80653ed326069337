"""Hyperparameters as SageMaker stores them (JSON-encoded strings) and as the toolkit decodes them."""
from __future__ import annotations

import json
from enum import Enum
from typing import Any


class HyperparameterEncoding(str, Enum):
    """How a job's hyperparameters travel from the SDK to the script: what CreateTrainingJob's HyperParameters (so
    hyperparameters.json) hold, and what the container makes of them (argv, SM_HP_*, SM_HPS)."""

    V2 = "v2"  # SDK v2 estimators + sagemaker-training-toolkit: values json.dumps-ed; `--k str(v)` sorted (below)
    V3 = "v3"  # SDK v3 ModelTrainer + its container drivers: strings raw; `--k json` in order (v3_hyperparameters.py)


# The toolkit's reserved `sagemaker_*` keys: not user HPs, not framework parameters either.
RESERVED_SAGEMAKER_KEYS = frozenset({
    "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_region", "sagemaker_container_log_level", "sagemaker_job_name", "sagemaker_s3_output",
})
# Keys the toolkit drops from the user's HPs.
IGNORED_KEYS = frozenset({"_tuning_objective_metric", "default_user_module_name"})


def encode_hyperparameters(values: dict[str, Any]) -> dict[str, str]:
    """What the SDK writes: every value `json.dumps`-ed (strings gain quotes)."""
    return {str(k): json.dumps(v) for k, v in values.items()}


def decode_hyperparameters(raw: dict[str, str]) -> dict[str, Any]:
    """What the toolkit reads: `json.loads` each value, the raw string kept when it is not JSON."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            out[key] = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            out[key] = value
    return out


def split_hyperparameters(decoded: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(user HPs, additional framework parameters, reserved sagemaker_* values)."""
    user: dict[str, Any] = {}
    framework: dict[str, Any] = {}
    reserved: dict[str, Any] = {}
    for key, value in decoded.items():
        if key in RESERVED_SAGEMAKER_KEYS:
            reserved[key] = value
        elif key.startswith("sagemaker_"):
            framework[key] = value
        elif key not in IGNORED_KEYS:
            user[key] = value
    return user, framework, reserved


def _arg_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):  # the toolkit's "%s=%s" % (k, v): members go through str() as they are
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def to_cmd_args(user_hps: dict[str, Any]) -> list[str]:
    """`mapping.to_cmd_args`: sorted keys, `-k` for one-character keys, str() of each value."""
    args: list[str] = []
    for key in sorted(user_hps):
        name = str(key)
        args += [f"-{name}" if len(name) == 1 else f"--{name}", _arg_value(user_hps[key])]
    return args
