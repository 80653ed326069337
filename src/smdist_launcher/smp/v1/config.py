"""SMP v1 parameters (``mp_parameters``): SMP's defaults and checks."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...contract.smp_parameters import ALL_KEYS
from ...errors import ErrorItem, ValidationError
from ..config import KEY_PATH
from .notices import warn_once

PIPELINES = ("interleaved", "simple")
PLACEMENTS = ("cluster", "spread")
OPTIMIZE = ("memory", "speed")


@dataclass(frozen=True)
class V1Config:
    pipeline_parallel_degree: int = 1
    tensor_parallel_degree: int = 1
    microbatches: int = 1
    pipeline: str = "interleaved"
    placement_strategy: str = "cluster"
    optimize: str = "memory"
    ddp: bool = False
    auto_partition: bool = True
    default_partition: int = 0
    active_microbatches: int | None = None
    offload_activations: bool = False
    activation_loading_horizon: int = 4
    sharded_data_parallel_degree: int = 1
    fp16: bool = False
    bf16: bool = False


_INTS = ("pipeline_parallel_degree", "tensor_parallel_degree", "microbatches", "default_partition",
         "activation_loading_horizon", "sharded_data_parallel_degree", "active_microbatches")
_BOOLS = ("ddp", "auto_partition", "offload_activations", "fp16", "bf16")
_CHOICES = {"pipeline": PIPELINES, "placement_strategy": PLACEMENTS, "optimize": OPTIMIZE}
_HANDLED = frozenset(V1Config.__dataclass_fields__) | {"partitions"}
# Keys AWS's library takes in smp.init(config) that the SDK's mp_parameters list lacks, with why they change
# nothing here (AWS's sharded-data-parallel GPT-2 example passes static_mode).
_INIT_ONLY = {
    "static_mode": "it is an execution-mode switch of SMP's own engine (not in AWS's parameter reference); here "
                   "each step runs as torch executes it, with the same results either way",
}
# Every other SMP key (the contract's list) is accepted for compatibility and has no effect here.
_IGNORED = (ALL_KEYS | frozenset(_INIT_ONLY)) - _HANDLED


# Parsed and checked like SMP does, but nothing here acts on them (said once when set to a non-default value).
_NO_EFFECT = {
    "optimize": "it picks SMP's memory/speed trade-off for tensor parallelism; the layout here is fixed",
    "offload_activations": "activations stay in device memory with SMP v1 here (SMP v2's sm_activation_offloading "
                           "offloads)",
    "activation_loading_horizon": "it tunes activation offloading, which SMP v1 does not do here",
    "active_microbatches": "the torch pipelining schedule decides how many microbatches are in flight",
}


def parse_v1(raw: Mapping[str, Any], where: str = KEY_PATH) -> V1Config:
    errors: list[ErrorItem] = []
    values: dict[str, Any] = {}
    raw = dict(raw)
    if "partitions" in raw:  # SMP's alias
        if "pipeline_parallel_degree" in raw and raw["pipeline_parallel_degree"] != raw["partitions"]:
            errors.append(ErrorItem(f"{where}.partitions", "is an alias of pipeline_parallel_degree and disagrees "
                                    f"with it ({raw['pipeline_parallel_degree']}); set only one", raw["partitions"]))
        raw.setdefault("pipeline_parallel_degree", raw.pop("partitions"))
        raw.pop("partitions", None)
    for key, value in raw.items():
        path = f"{where}.{key}"
        if key in _INIT_ONLY:
            warn_once(f"param-{key}", f"parameter {key}={value!r} is accepted and has no effect here: "
                      f"{_INIT_ONLY[key]}")
            continue
        if key in _IGNORED:
            warn_once(f"param-{key}", f"parameter {key}={value!r} is accepted for compatibility and has no effect "
                      "in this runtime (docs/compat.md lists each SMP v1 parameter)")
            continue
        if key in _INTS:
            if value is None and key == "active_microbatches":
                continue
            least = 0 if key == "default_partition" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                errors.append(ErrorItem(path, "must be a positive integer", value))
            else:
                values[key] = value
        elif key in _BOOLS:
            if not isinstance(value, bool):
                errors.append(ErrorItem(path, "must be true or false", value))
            else:
                values[key] = value
        elif key in _CHOICES:
            if value not in _CHOICES[key]:
                errors.append(ErrorItem(path, f"must be one of {list(_CHOICES[key])}", value))
            else:
                values[key] = value
        else:
            errors.append(ErrorItem(path, "is not an SMP v1 parameter (see the SMP v1 configuration reference)", value))
    if values.get("tensor_parallel_degree", 1) > 1 and not values.get("ddp", False):
        errors.append(ErrorItem(f"{where}.ddp", "must be true when tensor_parallel_degree > 1 (as in SMP v1)",
                                values.get("ddp", False)))
    for key, why in _NO_EFFECT.items():
        if key in values and values[key] != getattr(V1Config(), key):
            warn_once(f"param-{key}", f"parameter {key}={values[key]!r} has no effect here: {why}")
    for key in ("fp16", "bf16"):
        if values.get(key):
            warn_once(f"param-{key}", f"parameter {key}=true has no effect here: the model keeps its own dtype; use "
                      "torch.autocast (with smp.amp.GradScaler for float16) or build the model in that dtype "
                      "(smp.model_creation(dtype=...))")
    if errors:
        raise ValidationError(errors)
    return V1Config(**values)


def check_v1_world(cfg: V1Config, world_size: int, where: str = KEY_PATH) -> None:
    mp = cfg.pipeline_parallel_degree * cfg.tensor_parallel_degree
    if world_size % mp:
        raise ValidationError([ErrorItem(
            f"{where}.pipeline_parallel_degree",
            f"pipeline_parallel_degree x tensor_parallel_degree = {mp} must divide the number of processes "
            f"({world_size})", cfg.pipeline_parallel_degree)])
    sdp = cfg.sharded_data_parallel_degree
    if sdp > 1 and (world_size // mp) % sdp:
        raise ValidationError([ErrorItem(
            f"{where}.sharded_data_parallel_degree",
            f"must divide the number of model replicas ({world_size // mp} = {world_size} processes / "
            f"(pipeline_parallel_degree x tensor_parallel_degree = {mp}))", sdp)])
