"""Manual pipeline partitioning: ``smp.partition(index)`` / ``smp.set_partition(module, index)``.

Used when ``auto_partition`` is false. Stages are cut between the model's top-level children (as the automatic
split is), so each top-level child must sit in one partition and partitions must follow the children's order.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn
from torch.nn.modules.module import register_module_module_registration_hook

from ...errors import ErrorItem, ValidationError
from .notices import warn_once
from .state import state

_stack: list[int] = []


@contextlib.contextmanager
def partition(index: int) -> Iterator[None]:
    """Modules assigned as submodules inside go to pipeline partition ``index`` (the innermost context wins)."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"smp.partition: index must be a non-negative integer, got {index!r}")

    def mark(parent: nn.Module, name: str, child: nn.Module | None) -> None:
        if child is not None and _stack:
            state.partition_marks.setdefault(id(child), _stack[-1])

    handle = register_module_module_registration_hook(mark)
    _stack.append(index)
    try:
        yield
    finally:
        _stack.pop()
        handle.remove()


def set_partition(module: nn.Module, index: int) -> None:
    """Put ``module`` in pipeline partition ``index`` (call before smp.DistributedModel)."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"smp.set_partition: index must be a non-negative integer, got {index!r}")
    state.partition_marks[id(module)] = index


def _partition_of(module: nn.Module) -> int | None:
    for sub in module.modules():
        if id(sub) in state.partition_marks:
            return state.partition_marks[id(sub)]
    return None


def manual_split_points(model: nn.Module) -> list[str] | None:
    """Top-level child names that start partitions 1..pp-1, or None for automatic partitioning."""
    cfg = state.cfg
    if cfg.auto_partition:
        if state.partition_marks:
            warn_once("partition-auto", "smp.partition()/set_partition() are ignored because auto_partition is true "
                      "(set auto_partition: false in the smp parameters to partition by hand)")
        return None
    pp = cfg.pipeline_parallel_degree
    children = list(model.named_children())
    marked = [(name, _partition_of(child)) for name, child in children]
    parts = [(name, p if p is not None else cfg.default_partition) for name, p in marked]
    errors = []
    for name, p in parts:
        if p >= pp:
            errors.append(ErrorItem(f"partition of {name}", f"must be below pipeline_parallel_degree ({pp})", p))
    order = [p for _, p in parts]
    if order != sorted(order):
        errors.append(ErrorItem("partitions", "top-level children must be assigned to partitions in non-decreasing "
                                "order here (stages are cut between top-level children)", dict(parts)))
    missing = sorted(set(range(pp)) - set(order))
    if missing:
        errors.append(ErrorItem("partitions", f"partitions {missing} have no top-level child; every partition needs "
                                "at least one", dict(parts)))
    if errors:
        raise ValidationError(errors)
    return [name for i, (name, p) in enumerate(parts) if i > 0 and p != parts[i - 1][1]]
