"""SageMaker SDK v3's hyperparameter contract, byte for byte (stdlib only: the runtime imports it).

Read from aws/sagemaker-python-sdk (sagemaker-train): `ModelTrainer.train()` sends every value through
`safe_serialize` (strings as they are, anything else `json.dumps`, unserialisable values `str()`), and that mapping is
CreateTrainingJob's HyperParameters, so /opt/ml/input/config/hyperparameters.json. In the container,
`scripts/environment.py` reads it back with `safe_deserialize` (`json.loads`, the string kept when it is not JSON) and
exports `SM_HP_<KEY>` (key upper-cased, `-` → `_`) and `SM_HPS` (the whole mapping), each value `safe_serialize`-d;
every driver (basic .py/.sh, torchrun, mpirun) then passes `json.loads($SM_HPS)` through `hyperparameters_to_cli_args`:
`--<key> safe_serialize(safe_deserialize(value))` for each key in order (no sorting, `--` even for one-letter keys).

So `{"boolean": True, "string": "Hello World", "list": [1, 2]}` reaches the script as
`--boolean true --string 'Hello World' --list '[1, 2]'` (SDK v2 and its toolkit: `--boolean True ... --list [1, 2]`,
sorted, dicts as `k=v,...`; contract/hyperparameters.py).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

HPS_ENV = "SM_HPS"
HP_ENV_PREFIX = "SM_HP_"


def safe_serialize(value: Any) -> str:
    """v3's `safe_serialize`: a string as it is, anything else as JSON (`str()` when JSON cannot hold it)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def safe_deserialize(value: Any) -> Any:
    """v3's `safe_deserialize`: JSON text decoded, any other string kept, non-strings as they are."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def encode(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """CreateTrainingJob's HyperParameters (and hyperparameters.json) as v3 sends them."""
    return {str(key): safe_serialize(value) for key, value in hyperparameters.items()}


def decode(raw: Mapping[str, str]) -> dict[str, Any]:
    """What environment.py makes of hyperparameters.json: the values SM_HPS holds."""
    return {key: safe_deserialize(value) for key, value in raw.items()}


def cli_args(decoded: Mapping[str, Any]) -> list[str]:
    """The drivers' `hyperparameters_to_cli_args` over SM_HPS's values: `--key value` in the mapping's order."""
    args: list[str] = []
    for key, value in decoded.items():
        args += [f"--{key}", safe_serialize(safe_deserialize(value))]
    return args


# What a shell's `export NAME=...` takes as NAME (ASCII): sm_training.env is sourced by a shell, which refuses the
# line of any other name, so the script never sees that variable (`a.b`, `é`, `a b`, `a=b`: a name with `=` could not
# even be passed to a process).
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name(key: str) -> str:
    return HP_ENV_PREFIX + key.replace("-", "_").upper()


def env_vars(decoded: Mapping[str, Any]) -> dict[str, str]:
    """`SM_HP_<KEY>` for each hyperparameter whose name a shell takes and `SM_HPS`, as the script reads them from
    sm_training.env."""
    out = {env_name(key): safe_serialize(value) for key, value in decoded.items()
           if _SHELL_NAME.fullmatch(env_name(key))}
    out[HPS_ENV] = safe_serialize(dict(decoded))
    return out
