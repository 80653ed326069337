"""SageMaker SDK v3's config objects read by shape, so `sagemaker` is never imported (compare sdk_objects.py for v2).

Any object becomes plain data: a mapping as it is; a pydantic model (v3's configs and ours) by its declared fields
(and extras); another object with `model_dump()` through it; any other object through its public attributes
(`vars()`), recursively. Fields left unset are dropped: v3's models list every field they have, and None (or
sagemaker-core's `Unassigned()`, in its shapes such as StoppingCondition) is how they say "not given"; what remains
is checked by our schemas (jobspec/v3_configs.py), which name anything unknown.

Torchrun or MPI: by class name (v3's `Torchrun`, `MPI`, and ours); for mappings and other objects by a `type` key
("torchrun" or "mpi"), else by a field only one of them has (`smp` → Torchrun, `mpi_additional_options` → MPI).
Anything else is ambiguous and reported (distributed_kind returns None).
"""
from __future__ import annotations

import enum
from typing import Any

_KINDS_BY_CLASS = {"Torchrun": "torchrun", "MPI": "mpi"}


def is_unset(value: Any) -> bool:
    """None, or sagemaker-core's `Unassigned()`: how its shapes (StoppingCondition, ...) mark a field not given."""
    return value is None or type(value).__name__ == "Unassigned"


def _fields(value: Any) -> dict[str, Any] | None:
    """A pydantic model's fields by attribute (its dump would turn `Unassigned()` into {}), extras included; else
    model_dump(); else the public attributes."""
    declared = getattr(type(value), "model_fields", None)
    if isinstance(declared, dict):
        out = {name: getattr(value, name, None) for name in declared}
        extra = getattr(value, "model_extra", None)
        return {**out, **extra} if isinstance(extra, dict) else out
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, dict) else None
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return {k: v for k, v in attributes.items() if not k.startswith("_")}
    return None


def plain(value: Any) -> Any:
    """`value` as mappings, lists and scalars (unset fields dropped); a cycle raises RecursionError."""
    if isinstance(value, enum.Enum):  # v3's Mode and the like
        return value.value
    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if not is_unset(v)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    fields = _fields(value)
    if fields is None:
        return value  # left for the schema to refuse with its type
    data = {k: plain(v) for k, v in fields.items() if not is_unset(v)}
    kind = distributed_kind(value)
    if kind is not None:
        data["type"] = kind
    return data


def distributed_kind(value: Any) -> str | None:
    """"torchrun", "mpi", or None when the object does not say."""
    by_class = _KINDS_BY_CLASS.get(type(value).__name__)
    if by_class is not None:
        return by_class
    data = value if isinstance(value, dict) else getattr(value, "__dict__", None)
    if not isinstance(data, dict):
        return None
    if data.get("type") in ("torchrun", "mpi"):
        return str(data["type"])
    if data.get("smp") is not None:
        return "torchrun"
    if data.get("mpi_additional_options") is not None:
        return "mpi"
    return None


def training_mode(value: Any) -> Any:
    """v3's Mode enum (or its name/value as a string) as our string."""
    if isinstance(value, enum.Enum):
        return value.name
    return value
