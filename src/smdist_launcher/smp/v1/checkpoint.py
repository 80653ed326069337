"""``smp.save`` / ``smp.load``: partial (one file per pp/tp rank) or full (rank 0, TP shards gathered)."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from .state import state


def partial_path(f: str | os.PathLike) -> str:
    topo = state.topo()
    return f"{os.fspath(f)}_{topo.pp_rank}_{topo.tp_rank}"


def _to_cpu(obj: Any, dtensor: Callable[[DTensor], torch.Tensor]) -> Any:
    """Every tensor in a (nested) state dict on the CPU; DTensors turned into plain tensors by ``dtensor``."""
    if isinstance(obj, DTensor):
        return dtensor(obj).cpu()
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v, dtensor) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v, dtensor) for v in obj)
    return obj


def _gather_full(obj: Any) -> Any:
    return _to_cpu(obj, DTensor.full_tensor)


def _local(obj: Any) -> Any:
    return _to_cpu(obj, DTensor.to_local)


def save(obj: Any, f: str | os.PathLike, partial: bool = True, v3: bool = False, **kwargs: Any) -> None:
    """partial=True: each (pp, tp) rank of the first data-parallel replica writes ``f_{pp}_{tp}``;
    partial=False: shards are gathered (a collective: call on every rank) and rank 0 writes ``f``."""
    topo = state.topo()
    if partial:
        if topo.rdp_rank == 0:
            torch.save(_local(obj), partial_path(f), **kwargs)
    else:
        full = _gather_full(obj)
        if dist.get_rank() == 0:
            torch.save(full, os.fspath(f), **kwargs)
    dist.barrier()


def load(f: str | os.PathLike, map_location: Any = None, partial: bool = True, **kwargs: Any) -> Any:
    path = partial_path(f) if partial else os.fspath(f)
    obj = torch.load(path, map_location=map_location or "cpu", weights_only=False, **kwargs)
    return obj
