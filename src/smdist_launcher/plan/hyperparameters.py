"""Hyperparameter encodings, byte-for-byte as SageMaker does them.

Three encodings of the same user dict:
- ``json_encode``: what the SDK writes into hyperparameters.json (``json.dumps`` of every value);
- ``to_cmd_args``: what the container passes to the script (sagemaker-training-toolkit ``mapping.to_cmd_args``
  applied to the values as the container reads them back with ``json.loads``);
- ``env_value``: what ``SM_HP_<NAME>`` holds (toolkit ``mapping.to_env_vars``; the contract's encoder).

Jobs of SDK v3's ModelTrainer (``HyperparameterEncoding.V3``) follow v3's rules instead
(contract/v3_hyperparameters.py): ``file_values``, ``script_args`` and ``script_env`` pick the job's.

No shell is involved anywhere: every flag and value is its own argv token.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..contract import v3_hyperparameters as v3
from ..contract.environment import encode_env_value as env_value
from ..contract.hyperparameters import (
    HyperparameterEncoding,
    split_hyperparameters,
    to_cmd_args as contract_cmd_args,
)
from ..errors import ErrorItem, ValidationError

__all__ = ["as_container_sees", "env_value", "file_values", "json_encode", "script_args", "script_env",
           "script_hyperparameters", "to_cmd_args"]


def as_container_sees(hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """The values after the SDK's json.dumps and the container's json.loads (tuples → lists, dict keys → str)."""
    try:
        return {str(k): json.loads(json.dumps(v)) for k, v in hyperparameters.items()}
    except (TypeError, ValueError):
        raise ValidationError(_unencodable(hyperparameters)) from None


def _unencodable(hyperparameters: Mapping[str, Any]) -> list[ErrorItem]:
    bad = []
    for key, value in hyperparameters.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            bad.append(ErrorItem(f"hyperparameters.{key}", "must be JSON-serialisable (str, number, bool, null, "
                                 f"list, dict), got {type(value).__name__}: {exc}", value))
    return bad


def to_cmd_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """``{"lr": 0.1, "b": 2}`` → ``["-b", "2", "--lr", "0.1"]``: the container's own encoding (contract.to_cmd_args:
    sorted keys, one-char keys get one dash, dicts become ``k1=v1,k2=v2``, ``True`` stays ``True``, lists keep Python's
    repr, ``None`` becomes "") applied to the values as the container reads them back."""
    return contract_cmd_args(as_container_sees(hyperparameters))


def json_encode(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """hyperparameters.json values. Keys inside dict values are sorted so the plan does not depend on dict order."""
    return {str(k): json.dumps(v, sort_keys=True) for k, v in hyperparameters.items()}


def script_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters the toolkit hands to the script (no ``sagemaker_*`` or tuning bookkeeping keys)."""
    return split_hyperparameters(dict(hyperparameters))[0]


def file_values(hyperparameters: Mapping[str, Any], script_keys: Iterable[str],
                encoding: HyperparameterEncoding) -> dict[str, str]:
    """hyperparameters.json: the script's keys in the job's encoding; the launcher's ``sagemaker_*`` keys (ours, for
    the runtime; v3 sends none) JSON-encoded whatever the encoding."""
    if encoding is HyperparameterEncoding.V2:
        return json_encode(hyperparameters)
    as_container_sees(hyperparameters)  # the same refusal of values JSON cannot hold
    mine = set(script_keys)
    return {**json_encode({k: v for k, v in hyperparameters.items() if k not in mine}),
            **v3.encode({k: v for k, v in hyperparameters.items() if k in mine})}


def script_args(hyperparameters: Mapping[str, Any], encoding: HyperparameterEncoding) -> list[str]:
    """The arguments after the entry point, as the job's container makes them from hyperparameters.json."""
    if encoding is HyperparameterEncoding.V2:
        return to_cmd_args(hyperparameters)
    return v3.cli_args(v3.decode(v3.encode(hyperparameters)))


def script_env(hyperparameters: Mapping[str, Any], encoding: HyperparameterEncoding) -> dict[str, str]:
    """Variables the job's container sets from the hyperparameters beyond the training toolkit's SM_* (which every
    host gets from hyperparameters.json): none for v2; v3's SM_HP_<KEY> and SM_HPS."""
    if encoding is HyperparameterEncoding.V2:
        return {}
    return v3.env_vars(v3.decode(v3.encode(hyperparameters)))
