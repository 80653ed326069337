"""Async tensor parallelism for the row-parallel projections (CUDA, sequence parallelism): the matmul fused with
the reduce-scatter in forward, and the all-gather of the output gradient fused with the input-gradient matmul in
backward (torch's symmetric-memory ops: the collective is cut into per-rank chunks that the copy engines move
while the matmuls of the other chunks run, instead of the matmul and then the collective, unoverlapped).

Off CPU (gloo) and while compiling, the projections keep the plain matmul + collective (``local_modules``).
"""
from __future__ import annotations

import logging
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd import Function

log = logging.getLogger("smdist_launcher.smp")

_USABLE: dict[str, bool] = {}  # group name -> symmetric memory set up (False: the plain path for good)


def _one_host(group: Any) -> bool:
    """Every rank of the group on this host (symmetric memory is peer-to-peer between one host's GPUs): the
    ranks' global numbers in one block of LOCAL_WORLD_SIZE (torchrun's / mpirun's layout)."""
    from ..process_group import local_size
    per_host = local_size()
    ranks = dist.get_process_group_ranks(group)
    return len({r // per_host for r in ranks}) == 1


def usable(x: torch.Tensor, group: Any) -> bool:
    """CUDA tensors, not under compile (Inductor has its own async-TP pass), a group on one host whose symmetric
    memory could be set up."""
    if not x.is_cuda or torch.compiler.is_compiling():
        return False
    name = group.group_name
    ok = _USABLE.get(name)
    if ok is None:
        ok = _USABLE[name] = _one_host(group) and _enable(name)
    return ok


def _enable(name: Any) -> bool:
    try:
        from torch.distributed import _symmetric_memory as symm
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "no need to call it" in newer torch: harmless there
            if not symm.is_symm_mem_enabled_for_group(name):
                symm.enable_symm_mem_for_group(name)
    except (ImportError, RuntimeError, AttributeError) as exc:  # a build or platform without it: plain path
        log.warning("smp: async tensor parallelism off for group %s (%s)", name, exc)
        return False
    return True


class MatmulReduceScatter(Function):
    """``reduce_scatter(x @ w.T)`` along ``dim`` (forward) and ``all_gather(g) @ w`` (backward), both fused."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
        ctx.dim, ctx.group_name = dim, group.group_name
        ctx.save_for_backward(x, w)
        return torch.ops.symm_mem.fused_matmul_reduce_scatter(x.contiguous(), w.t(), "sum", dim, group.group_name)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        x, w = ctx.saved_tensors
        grad_full, (grad_x,) = torch.ops.symm_mem.fused_all_gather_matmul(
            grad.contiguous(), [w], ctx.dim, ctx.group_name)
        grad_w = grad_full.flatten(0, -2).t().mm(x.flatten(0, -2))
        return grad_x, grad_w.to(w.dtype), None, None


def row_linear(dim: int, group: Any) -> Any:
    """An ``f(x, weight, bias)`` for ``lean_saves.linear``: the row projection's matmul + reduce-scatter (no bias:
    added after the reduce-scatter by the caller)."""
    def f(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return MatmulReduceScatter.apply(x, weight, dim, group)
    return f

