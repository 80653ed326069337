"""SMP v1 tensor parallelism on DTensor, with SMP v1's data layout.

In SMP v1 the ranks of a tensor-parallel group read *different* batches. A distributed nn.Linear
all-gathers its input over the batch dimension, computes its column shard, and hands each rank back
the rows of its own batch (all-to-all). Each marked Linear is distributed on its own, so any model
graph stays correct. Other module types (convolutions, embeddings) stay replicated.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from torch.nn.modules.module import register_module_parameter_registration_hook

from .state import state

SUPPORTED = (nn.Linear,)


@contextlib.contextmanager
def tensor_parallelism(enabled: bool = True, **kwargs: Any) -> Iterator[None]:
    """Modules created inside are distributed by DistributedModel (supported types: nn.Linear)."""
    if not enabled:
        yield
        return

    def mark(module: nn.Module, name: str, param: Any) -> None:
        if isinstance(module, SUPPORTED):
            state.tp_marks[id(module)] = dict(kwargs)

    handle = register_module_parameter_registration_hook(mark)
    try:
        yield
    finally:
        handle.remove()


def set_tensor_parallelism(module: nn.Module, enabled: bool = True, **kwargs: Any) -> None:
    """Mark ``module`` and its supported submodules (call before DistributedModel)."""
    for sub in module.modules():
        if isinstance(sub, SUPPORTED):
            if enabled:
                state.tp_marks[id(sub)] = dict(kwargs)
            else:
                state.tp_marks.pop(id(sub), None)


def marked_names(root: nn.Module) -> list[str]:
    return [name for name, mod in root.named_modules() if id(mod) in state.tp_marks]


def apply_tensor_parallelism(root: nn.Module, names: list[str], tp_mesh: DeviceMesh) -> dict[int, nn.Parameter]:
    """Distribute the named Linears of ``root``; returns id(old param) -> new DTensor param."""
    present = [n for n in names if _has(root, n)]
    if not present or tp_mesh.size() == 1:
        return {}
    before = {n: p for n, p in root.named_parameters()}
    style = ColwiseParallel(input_layouts=Shard(0), output_layouts=Shard(0))
    parallelize_module(root, tp_mesh, {n: style for n in present})
    after = dict(root.named_parameters())
    return {id(before[n]): after[n] for n in before if n in after and after[n] is not before[n]}


def _has(root: nn.Module, name: str) -> bool:
    try:
        root.get_submodule(name)
        return True
    except AttributeError:
        return False
