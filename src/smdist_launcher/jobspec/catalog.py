"""The instance catalog: ml.* instance type → GPUs, Neuron cores, vCPUs, memory, EFA (data in instances.json)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .resolved import InstanceInfo

LOCAL_TYPES = ("local", "local_cpu", "local_gpu")


@functools.cache
def _rows() -> dict[str, dict[str, Any]]:
    # read on first use and imported here: the estimators import this module, and their import must stay fast
    import json
    from importlib import resources

    text = resources.files(__package__).joinpath("instances.json").read_text(encoding="utf-8")
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


def known_instance_types() -> list[str]:
    return list(_rows())


def is_known(instance_type: str) -> bool:
    return instance_type in _rows()


@functools.cache
def lookup(instance_type: str) -> InstanceInfo:
    """The catalog row of `instance_type`; KeyError for unknown types (validation reports those first)."""
    from .resolved import InstanceInfo  # pydantic: loaded by the first lookup, not by importing the catalog

    return InstanceInfo(instance_type=instance_type, **_rows()[instance_type])


def is_local(instance_type: str) -> bool:
    return instance_type in LOCAL_TYPES


def is_trainium(instance_type: str) -> bool:
    # SageMaker's test: the family (second dotted part) starts with "trn".
    parts = instance_type.split(".")
    return len(parts) >= 2 and parts[0] == "ml" and parts[1].startswith("trn")
