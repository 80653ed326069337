"""Checkpoints of FSDP1 over tsm.transform's tensor-parallel modules, whose parameters are plain local shards.

FSDP1 flattens each TP rank's piece under the same key, so its state dicts alone would be one rank's piece:
- sharded/local: each TP rank writes its own DCP folder, ``<path>/tp<tp_rank>``, over its FSDP group (read back by
  the same TP rank of the same TP degree, as SMP's own per-TP-rank checkpoints are);
- full: every TP-sharded tensor (parameters and the optimizer state of the same shape) is gathered along its TP
  dimension, so ``model.pt`` holds the whole model as without TP (loading one back into FSDP1 over TP pieces is
  refused: resume from the sharded folders).
"""
from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp._common_utils import clean_tensor_name


def uses_local_tp(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FullyShardedDataParallel

    from ...state import state
    from ...tensor_parallel.local_modules import local_tp_modules
    return bool(state.initialized and state.tensor_parallel_degree > 1 and local_tp_modules(model)
                and any(isinstance(m, FullyShardedDataParallel) for m in model.modules()))


def split_dims(model: nn.Module) -> dict[str, int]:
    """Clean FQN of every TP-sharded parameter → the dimension it is split along: which ones are sharded is
    local_modules' (is_tp_sharded); row-parallel modules split their input columns, the others (column, head,
    embedding) their output or vocabulary rows."""
    from ...tensor_parallel.local_modules import is_tp_sharded, local_tp_modules
    wanted = {id(m) for m in local_tp_modules(model)}
    dims: dict[str, int] = {}
    for mod_name, mod in model.named_modules():
        if id(mod) not in wanted:
            continue
        dim = 1 if getattr(type(mod), "_smp_tp_role", "") == "row" else 0
        for p_name in ("weight", "bias"):
            if is_tp_sharded(mod, p_name) and getattr(mod, p_name, None) is not None:
                dims[clean_tensor_name(f"{mod_name}.{p_name}" if mod_name else p_name)] = dim
    return dims


def rank_folder(path: str) -> str:
    from ...state import state
    return os.path.join(path, f"tp{state.tp_rank}")


def dcp_group(model: nn.Module, pg_metadata: Any) -> tuple[Any, bool]:
    """The FSDP group this TP rank's folder is written over, and whether this rank's replica writes it."""
    from ...state import state
    if pg_metadata is not None:
        group, _, action = pg_metadata
        return group, bool(action)
    return getattr(model, "process_group", None), state.ranker.get_rep_rank(dist.get_rank()) == 0


def _sizes(found: list[tuple[dict[str, Any], str, int]], group: Any) -> list[list[int]]:
    """For each TP-sharded tensor, its pieces' sizes along its split dimension on every rank of `group` (pieces may
    differ by padding): one exchange for all of them."""
    mine = [int(container[key].shape[dim]) for container, key, dim in found]
    every: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, mine, group=group)
    return [list(sizes) for sizes in zip(*every, strict=True)] if found else []


def _gather(local: torch.Tensor, dim: int, sizes: list[int], group: Any, writer: int) -> torch.Tensor | None:
    """On `writer` (a global rank), the whole tensor from every rank's piece along ``dim``; None elsewhere."""
    biggest = max(sizes)
    pad = list(local.shape)
    pad[dim] = biggest - local.shape[dim]
    padded = torch.cat([local, local.new_zeros(pad)], dim=dim) if pad[dim] else local.contiguous()
    parts = [torch.empty_like(padded) for _ in sizes] if dist.get_rank() == writer else None
    dist.gather(padded, parts, dst=writer, group=group)
    if parts is None:
        return None
    return torch.cat([p.narrow(dim, 0, n) for p, n in zip(parts, sizes, strict=True)], dim=dim)


def _each_sharded(model_sd: dict[str, Any], optim_sd: dict[str, Any], dims: dict[str, int]) -> list[
        tuple[dict[str, Any], str, int]]:
    """(container, key, dim) of every TP-sharded tensor: the parameters and their same-shaped optimizer state."""
    found = [(model_sd, k, d) for k, d in dims.items() if k in model_sd]
    for fqn, entry in (optim_sd.get("state") or {}).items():
        dim = dims.get(fqn)
        if dim is None or fqn not in model_sd:
            continue
        shape = model_sd[fqn].shape
        found += [(entry, key, dim) for key, value in entry.items()
                  if isinstance(value, torch.Tensor) and value.shape == shape]
    return found


def gather_full(model: nn.Module, model_sd: dict[str, Any], optim_sd: dict[str, Any], writer: int = 0) -> None:
    """In place on `writer`, the global rank that saves them: every TP-sharded tensor of the full (FSDP-unsharded)
    state dicts made whole across its TP group, and the model's tensors in host memory. The other ranks of that
    group send their pieces; the other TP groups hold nothing the writer saves and take no part."""
    from ...state import state
    group = state.tp_process_group
    if writer not in dist.get_process_group_ranks(group):
        return
    found = _each_sharded(model_sd, optim_sd, split_dims(model))
    for (container, key, dim), sizes in zip(found, _sizes(found, group), strict=True):
        whole = _gather(container[key], dim, sizes, group, writer)
        if whole is not None:
            container[key] = whole
    if dist.get_rank() == writer:
        model_sd.update({k: v.cpu() for k, v in model_sd.items() if isinstance(v, torch.Tensor)})
