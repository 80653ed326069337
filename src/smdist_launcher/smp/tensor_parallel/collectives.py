"""Tensor-parallel collectives on plain tensors, as autograd functions (Megatron's f/g operators).

Inside a transformer block the activations stay plain tensors: one c10d collective per boundary, no DTensor
dispatch per op (that host-side dispatch made DTensor tensor parallelism slower than no tensor parallelism).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd import Function


def _size(group: Any) -> int:
    return dist.get_world_size(group)


def _divisible_size(x: torch.Tensor, dim: int, group: Any) -> int:
    n = _size(group)
    if x.shape[dim] % n:
        raise ValueError(f"smp: tensor parallelism splits dimension {dim} of size {x.shape[dim]} over {n} ranks; "
                         "it must be divisible (sequence length with sequence parallelism)")
    return n


def all_gather_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    n = _size(group)
    x = x.contiguous()
    out = x.new_empty((n * x.shape[0], *x.shape[1:]))
    dist.all_gather_into_tensor(out, x, group=group)
    if dim == 0:
        return out
    return torch.cat(out.chunk(n, dim=0), dim=dim)


def reduce_scatter_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    n = _divisible_size(x, dim, group)
    stacked = x.contiguous() if dim == 0 else torch.cat(x.chunk(n, dim=dim), dim=0)
    out = x.new_empty((stacked.shape[0] // n, *stacked.shape[1:]))
    dist.reduce_scatter_tensor(out, stacked, group=group)  # chunks stacked along 0: rank r gets chunk r
    return out


def split_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    n = _divisible_size(x, dim, group)
    return x.chunk(n, dim=dim)[dist.get_rank(group)].contiguous()


class CopyToTP(Function):
    """Forward: identity (the input is the same on every TP rank). Backward: sum the gradients over TP ranks."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTP(Function):
    """Forward: sum partial results over TP ranks. Backward: identity."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _DimCollective(Function):
    """A pair of collectives along ``dim``: ``_forward`` on the input, ``_backward`` on its gradient."""

    _forward: Callable[[torch.Tensor, int, Any], torch.Tensor]
    _backward: Callable[[torch.Tensor, int, Any], torch.Tensor]

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return cls._forward(x, dim, group)

    @classmethod
    def backward(cls, ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return cls._backward(grad, ctx.dim, ctx.group), None, None


class GatherFromSP(_DimCollective):
    """Forward: all-gather the sequence-sharded input along ``dim``. Backward: reduce-scatter (the consumers hold
    partial gradients)."""

    _forward = staticmethod(all_gather_dim)
    _backward = staticmethod(reduce_scatter_dim)


class ReduceScatterToSP(_DimCollective):
    """Forward: sum partial results and keep this rank's sequence chunk. Backward: all-gather."""

    _forward = staticmethod(reduce_scatter_dim)
    _backward = staticmethod(all_gather_dim)


class SplitToSP(_DimCollective):
    """Forward: keep this rank's chunk of a replicated tensor. Backward: all-gather the chunks' gradients."""

    _forward = staticmethod(split_dim)
    _backward = staticmethod(all_gather_dim)


class GatherToReplicated(_DimCollective):
    """Forward: all-gather along ``dim`` into a tensor every rank then uses alike (replicated compute follows).
    Backward: keep this rank's chunk of the (identical) gradient."""

    _forward = staticmethod(all_gather_dim)
    _backward = staticmethod(split_dim)
