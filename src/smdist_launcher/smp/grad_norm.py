"""``torch.sagemaker.grad_norm.clip_grad_norm_``: clip by the global gradient norm of a model sharded any way
SMP shards it (FSDP1 flat shards, FSDP2/DTensor shards, tensor-parallel shards, or nothing).

Each element of the full gradient must be counted exactly once: sharded pieces are summed over the ranks
that hold different pieces, replicated ones are not.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel


def _local_power(grads: Iterable[torch.Tensor], norm_type: float) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float64)
    for g in grads:
        g = g.detach()
        if g.numel() == 0:
            continue
        if math.isinf(norm_type):
            total = torch.maximum(total, g.abs().max().to(total.device, torch.float64).cpu())
        else:
            total += torch.linalg.vector_norm(g, norm_type, dtype=torch.float64).cpu() ** norm_type
    return total


def _reduce(value: torch.Tensor, group: Any, norm_type: float, device: torch.device) -> torch.Tensor:
    value = value.to(device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX if math.isinf(norm_type) else dist.ReduceOp.SUM, group=group)
    return value.cpu()


def _combine(parts: list[torch.Tensor], norm_type: float) -> torch.Tensor:
    if math.isinf(norm_type):
        return torch.stack(parts).max() if parts else torch.zeros((), dtype=torch.float64)
    return sum(parts, torch.zeros((), dtype=torch.float64))


def _device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def _fsdp1_with_tp(model: FullyShardedDataParallel, tp_sharded: frozenset[str], norm_type: float) -> torch.Tensor:
    """FSDP1 over tensor-parallel DTensors (use_orig_params), `tp_sharded` the clean names of the TP-sharded ones:
    FSDP's own norm misses the other TP ranks' shards."""
    sharded: list[torch.Tensor] = []
    replicated: list[torch.Tensor] = []
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        (sharded if _clean(name) in tp_sharded else replicated).append(p.grad)
    return _tp_total(sharded, replicated, model, norm_type)


def _fsdp1_local_tp(model: FullyShardedDataParallel, norm_type: float) -> torch.Tensor:
    """FSDP1 over tsm.transform's local-shard modules (use_orig_params True or False): each flat parameter's
    gradient shard is split back into its parameters' pieces, and the modules' TP roles say which pieces differ
    across TP ranks."""
    from torch.distributed.fsdp._traversal_utils import _get_fsdp_handles

    from .tensor_parallel.local_modules import is_tp_sharded
    sharded: list[torch.Tensor] = []
    replicated: list[torch.Tensor] = []
    for handle in _get_fsdp_handles(model):
        flat = handle.flat_param
        grad = flat.grad
        if grad is None:
            continue
        # use_orig_params: frozen parameters may share a flat parameter with trained ones; FSDP computes their
        # gradient pieces too, which its own norm (and the optimizer) never sees
        trained = [p.requires_grad for p in flat._params] if flat._params is not None else None
        for i, ((param_name, module, _), shard) in enumerate(
                zip(flat._param_infos, flat._shard_param_infos, strict=True)):
            if not shard.in_shard or (trained is not None and not trained[i]):
                continue
            piece = grad[shard.offset_in_shard:shard.offset_in_shard + shard.numel_in_shard]
            (sharded if is_tp_sharded(module, param_name) else replicated).append(piece)
    return _tp_total(sharded, replicated, model, norm_type)


def _tp_total(sharded: list[torch.Tensor], replicated: list[torch.Tensor], model: FullyShardedDataParallel,
              norm_type: float) -> torch.Tensor:
    """The norm over FSDP's shard group and the TP group: TP-sharded gradients differ across TP ranks, the
    replicated ones are counted once (divided by the TP degree before the TP sum)."""
    from .state import state
    dev = _device()
    tp = state.tensor_parallel_degree
    if math.isinf(norm_type):
        local = torch.maximum(_local_power(sharded, norm_type), _local_power(replicated, norm_type))
    else:
        local = _local_power(sharded, norm_type) + _local_power(replicated, norm_type) / tp
    total = _reduce(local, model.process_group, norm_type, dev)  # FSDP's shard group
    return _reduce(total, state.tp_process_group, norm_type, dev)


def _clean(name: str) -> str:
    for marker in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_offload_wrapped_module.",
                   "_orig_mod."):
        name = name.replace(marker, "")
    return name


def _dtensor_groups(grad: Any) -> tuple:
    """Process groups over which this DTensor grad's local pieces differ (its Shard mesh dims)."""
    from torch.distributed.tensor import Shard
    mesh = grad.device_mesh
    return tuple(mesh.get_group(i) for i, pl in enumerate(grad.placements) if isinstance(pl, Shard))


def _generic(grads: list[torch.Tensor], norm_type: float) -> torch.Tensor:
    """Plain tensors count once; DTensor grads are summed over their sharded mesh dimensions."""
    from torch.distributed.tensor import DTensor
    buckets: dict[tuple, list[torch.Tensor]] = {}
    for g in grads:
        if isinstance(g, DTensor):
            buckets.setdefault(_dtensor_groups(g), []).append(g.to_local())
        else:
            buckets.setdefault((), []).append(g)
    dev = _device()
    parts = []
    for groups, grads in buckets.items():
        value = _local_power(grads, norm_type)
        for group in groups:
            value = _reduce(value, group, norm_type, dev)
        parts.append(value)
    return _combine(parts, norm_type)


@torch.no_grad()
def clip_grad_norm_(model: nn.Module | Iterable[nn.Parameter], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, **_: Any) -> torch.Tensor:
    """Scale gradients in place so that their global ``norm_type`` norm is at most ``max_norm``; returns the norm
    before clipping (as a float32 tensor, like ``torch.nn.utils.clip_grad_norm_``)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import ActivationWrapper

    from .state import state
    norm_type = float(norm_type)
    while isinstance(model, ActivationWrapper):  # offload_wrapper / checkpoint_wrapper around the FSDP root
        model = model._checkpoint_wrapped_module
    if isinstance(model, FullyShardedDataParallel) and (not state.initialized or state.tensor_parallel_degree == 1):
        return model.clip_grad_norm_(max_norm, norm_type)
    grads = [p.grad for p in (model.parameters() if isinstance(model, nn.Module) else model) if p.grad is not None]
    if isinstance(model, FullyShardedDataParallel):
        tp_sharded = getattr(model, "_smp_tp_sharded_fqns", None)  # set by smp's FSDP over DTensor parameters
        power = (_fsdp1_local_tp(model, norm_type) if tp_sharded is None
                 else _fsdp1_with_tp(model, tp_sharded, norm_type))
    else:
        power = _generic(grads, norm_type)
    total = power if math.isinf(norm_type) else power ** (1.0 / norm_type)
    total = total.to(torch.float32)
    if error_if_nonfinite and not torch.isfinite(total):
        raise RuntimeError(f"smp clip_grad_norm_: the total norm of order {norm_type} is non-finite ({total.item()})")
    coef = max_norm / (float(total) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total
