"""SMP v2 configuration: SMP's keys, defaults and checks, read from the launcher or the caller.

Sources, first found wins: the ``config`` argument of ``tsm.init`` (dict, JSON string or path
to a JSON file), ``$SMP_CONFIG`` (same forms), ``$SM_HP_MP_PARAMETERS`` (the planner's JSON),
``mp_parameters`` inside ``$SM_HPS``. Stdlib only: this runs on the training hosts.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..contract.smp_parameters import V1_KEYS
from ..errors import ErrorItem, ValidationError

KEY_PATH = "distribution.smdistributed.modelparallel.parameters"

# v1-only keys that a v1 script may share with a v2 one through mp_parameters; v2 ignores them.
_V1_KEYS = V1_KEYS


@dataclass(frozen=True)
class SMPConfig:
    """The SMP v2 parameters with SMP's defaults (see the SMP v2 reference)."""

    hybrid_shard_degree: int = 0
    tensor_parallel_degree: int = 1
    context_parallel_degree: int = 1
    expert_parallel_degree: int = 1
    sm_activation_offloading: bool = True
    activation_loading_horizon: int = 2
    fsdp_cache_flush_warnings: bool = True
    allow_empty_shards: bool = False
    random_seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_INT_KEYS = ("hybrid_shard_degree", "tensor_parallel_degree", "context_parallel_degree",
             "expert_parallel_degree", "activation_loading_horizon")
_BOOL_KEYS = ("sm_activation_offloading", "fsdp_cache_flush_warnings", "allow_empty_shards")
_KNOWN = frozenset(f.name for f in fields(SMPConfig))


def _parse_source(value: str | Mapping[str, Any], where: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    text = value.strip()
    if not text.startswith("{") and os.path.isfile(text):
        with open(text, encoding="utf-8") as fh:
            text = fh.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError([ErrorItem(where, f"is not valid JSON ({exc.msg} at char {exc.pos}); pass a JSON "
                                                "object such as '{\"tensor_parallel_degree\": 2}' or a path to one",
                                         value)]) from None
    if not isinstance(data, dict):
        raise ValidationError([ErrorItem(where, "must be a JSON object of SMP parameters", data)])
    return data


def raw_parameters(config: str | Mapping[str, Any] | None = None,
                   environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """The raw parameter dict and where it came from (for error messages)."""
    env = os.environ if environ is None else environ
    if config is not None:
        return _parse_source(config, "tsm.init(config)"), "tsm.init(config)"
    if env.get("SMP_CONFIG"):
        return _parse_source(env["SMP_CONFIG"], "$SMP_CONFIG"), "$SMP_CONFIG"
    if env.get("SM_HP_MP_PARAMETERS"):
        return _parse_source(env["SM_HP_MP_PARAMETERS"], "$SM_HP_MP_PARAMETERS"), KEY_PATH
    if env.get("SM_HPS"):
        hps = _parse_source(env["SM_HPS"], "$SM_HPS")
        mp = hps.get("mp_parameters")
        if mp is not None:
            if isinstance(mp, str):
                return _parse_source(mp, "$SM_HPS.mp_parameters"), KEY_PATH
            if isinstance(mp, dict):
                return dict(mp), KEY_PATH
    return {}, KEY_PATH


def _as_int(key: str, value: Any, where: str, errors: list[ErrorItem]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        errors.append(ErrorItem(f"{where}.{key}", "must be an integer", value))
        return None
    try:
        return int(value)
    except ValueError:
        errors.append(ErrorItem(f"{where}.{key}", "must be an integer", value))
        return None


def _as_bool(key: str, value: Any, where: str, errors: list[ErrorItem]) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    errors.append(ErrorItem(f"{where}.{key}", "must be true or false", value))
    return None


def parse_config(raw: Mapping[str, Any], where: str = KEY_PATH) -> SMPConfig:
    """Validate keys and types; world-size checks happen in :func:`check_against_world`."""
    errors: list[ErrorItem] = []
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _V1_KEYS:
            continue
        if key not in _KNOWN:
            allowed = ", ".join(sorted(_KNOWN))
            errors.append(ErrorItem(f"{where}.{key}", f"is not an SMP v2 parameter; allowed: {allowed}", value))
        elif key in _INT_KEYS:
            values[key] = _as_int(key, value, where, errors)
        elif key in _BOOL_KEYS:
            values[key] = _as_bool(key, value, where, errors)
        elif key == "random_seed":
            values[key] = None if value is None else _as_int(key, value, where, errors)
    for key in ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree"):
        if values.get(key) is not None and values[key] < 1:
            errors.append(ErrorItem(f"{where}.{key}", "must be >= 1", values[key]))
    if values.get("hybrid_shard_degree") is not None and values["hybrid_shard_degree"] < 0:
        errors.append(ErrorItem(f"{where}.hybrid_shard_degree",
                                "must be >= 0 (0: shard over all data-parallel ranks, 1: no sharding, "
                                "N: shard over N ranks and replicate across the rest)", values["hybrid_shard_degree"]))
    if values.get("activation_loading_horizon") is not None and values["activation_loading_horizon"] < 1:
        errors.append(ErrorItem(f"{where}.activation_loading_horizon", "must be >= 1",
                                values["activation_loading_horizon"]))
    if errors:
        raise ValidationError(errors)
    return SMPConfig(**{k: v for k, v in values.items() if v is not None or k == "random_seed"})


def check_against_world(cfg: SMPConfig, world_size: int, where: str = KEY_PATH) -> None:
    """SMP's checks that need the number of processes."""
    errors: list[ErrorItem] = []
    tp, cp, ep, hsd = (cfg.tensor_parallel_degree, cfg.context_parallel_degree,
                       cfg.expert_parallel_degree, cfg.hybrid_shard_degree)
    if world_size % tp:
        errors.append(ErrorItem(f"{where}.tensor_parallel_degree",
                                f"must divide the number of processes ({world_size}); pick one of "
                                f"{[d for d in range(1, world_size + 1) if world_size % d == 0]}", tp))
    else:
        dp = world_size // tp
        if hsd > dp or (hsd and dp % hsd):
            errors.append(ErrorItem(f"{where}.hybrid_shard_degree",
                                    f"must be 0 or divide the data-parallel size world/tensor_parallel_degree = {dp}; "
                                    f"pick one of {[0] + [d for d in range(1, dp + 1) if dp % d == 0]}", hsd))
        if cp > 1 and cp > max(hsd, 1 if hsd else dp):
            errors.append(ErrorItem(f"{where}.context_parallel_degree",
                                    f"must be <= hybrid_shard_degree ({hsd or dp})", cp))
    if ep > 1 and tp > 1:
        errors.append(ErrorItem(f"{where}.expert_parallel_degree",
                                "is not compatible with tensor_parallel_degree > 1 (as in SMP); set one of them to 1",
                                ep))
    if ep > 1 and world_size % ep:
        errors.append(ErrorItem(f"{where}.expert_parallel_degree",
                                f"must divide the number of processes ({world_size})", ep))
    if errors:
        raise ValidationError(errors)


def load_config(config: str | Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> SMPConfig:
    raw, where = raw_parameters(config, environ)
    return parse_config(raw, where)
