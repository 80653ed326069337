"""Tensor-parallel collectives on plain tensors, as autograd functions (Megatron's f/g operators).

Inside a transformer block the activations stay plain tensors: one c10d collective per boundary, no DTensor
dispatch per op (that host-side dispatch made DTensor tensor parallelism slower than no tensor parallelism).
Under ``torch.compile`` (a script compiling its blocks, torchtitan's way) the same functions emit functional
collectives, which Dynamo traces; eagerly they call c10d directly (less host work per call). Along dimension 0
(sequence parallelism split over the batch) the gathered/scattered chunks are contiguous: no ``cat``/``chunk``
copies.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.autograd import Function


def _size(group: Any) -> int:
    return dist.get_world_size(group)


def _divisible_size(x: torch.Tensor, dim: int, group: Any) -> int:
    n = _size(group)
    if x.shape[dim] % n:
        raise ValueError(f"smp: tensor parallelism splits dimension {dim} of size {x.shape[dim]} over {n} ranks; "
                         "it must be divisible (sequence length with sequence parallelism)")
    return n


def _compiling() -> bool:
    return torch.compiler.is_compiling()


_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}


def all_reduce(x: torch.Tensor, group: Any, op: str = "sum") -> torch.Tensor:
    if _compiling():
        return funcol.all_reduce(x, op, group)
    x = x.contiguous()
    dist.all_reduce(x, op=_OPS[op], group=group)
    return x


def all_gather_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    if _compiling():
        return funcol.all_gather_tensor(x.contiguous(), dim, group)
    out, _ = all_gather_start(x, group)
    return all_gather_finish(out, dim, group)


def all_gather_start(x: torch.Tensor, group: Any, async_op: bool = False) -> tuple[torch.Tensor, Any]:
    """The chunks stacked along dimension 0 (the work handle with ``async_op``): ``all_gather_finish`` orders them
    along the gathered dimension."""
    n = _size(group)
    x = x.contiguous()
    out = x.new_empty((n * x.shape[0], *x.shape[1:]))
    return out, dist.all_gather_into_tensor(out, x, group=group, async_op=async_op)


def all_gather_finish(out: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    if dim == 0:
        return out
    return torch.cat(out.chunk(_size(group), dim=0), dim=dim)


def reduce_scatter_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    n = _divisible_size(x, dim, group)
    if _compiling():
        return funcol.reduce_scatter_tensor(x.contiguous(), "sum", dim, group)
    stacked = x.contiguous() if dim == 0 else torch.cat(x.chunk(n, dim=dim), dim=0)
    out = x.new_empty((stacked.shape[0] // n, *stacked.shape[1:]))
    dist.reduce_scatter_tensor(out, stacked, group=group)  # chunks stacked along 0: rank r gets chunk r
    return out


def split_dim(x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
    n = _divisible_size(x, dim, group)
    return x.chunk(n, dim=dim)[dist.get_rank(group)].contiguous()  # dim 0: a view, no copy


class CopyToTP(Function):
    """Forward: identity (the input is the same on every TP rank). Backward: sum the gradients over TP ranks."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return all_reduce(grad, ctx.group), None


class CopyToTPGrouped(Function):
    """``CopyToTP`` for several tensors at once: one all-reduce of their flattened gradients (per dtype) instead of
    one per tensor. For the parameters whose gradients are partial sums under sequence parallelism (the norms'
    weights and biases, row-parallel biases): a block's worth in one collective. Gradients of outputs the forward
    did not use stay None (the same on every TP rank: they run the same code)."""

    @staticmethod
    def forward(ctx: Any, group: Any, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.group = group
        ctx.set_materialize_grads(False)
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        out: list[torch.Tensor | None] = list(grads)
        by_dtype: dict[torch.dtype, list[tuple[int, torch.Tensor]]] = {}
        for i, g in enumerate(grads):
            if g is not None:
                by_dtype.setdefault(g.dtype, []).append((i, g))
        for present in by_dtype.values():
            flat = all_reduce(torch.cat([g.reshape(-1) for _, g in present]), ctx.group)
            for (i, g), piece in zip(present, flat.split([g.numel() for _, g in present]), strict=True):
                out[i] = piece.view_as(g)
        return (None, *out)


class ReduceFromTP(Function):
    """Forward: sum partial results over TP ranks. Backward: identity."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        return all_reduce(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def _dim_pair(name: str, doc: str, forward_op: Callable[[torch.Tensor, int, Any], torch.Tensor],
              backward_op: Callable[[torch.Tensor, int, Any], torch.Tensor]) -> type[Function]:
    """An autograd Function applying ``forward_op`` along ``dim`` and ``backward_op`` to its gradient. Made with
    static methods (Dynamo traces an autograd Function's static methods, not a shared classmethod base)."""

    def forward(ctx: Any, x: torch.Tensor, dim: int, group: Any) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return forward_op(x, dim, group)

    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return backward_op(grad, ctx.dim, ctx.group), None, None

    return type(name, (Function,), {"__doc__": doc, "__module__": __name__, "forward": staticmethod(forward),
                                    "backward": staticmethod(backward)})


GatherFromSP = _dim_pair(
    "GatherFromSP", "Forward: all-gather the sequence-parallel chunks along ``dim``. Backward: reduce-scatter (the "
    "consumers hold partial gradients).", all_gather_dim, reduce_scatter_dim)
ReduceScatterToSP = _dim_pair(
    "ReduceScatterToSP", "Forward: sum partial results and keep this rank's chunk along ``dim``. Backward: "
    "all-gather.", reduce_scatter_dim, all_gather_dim)
SplitToSP = _dim_pair(
    "SplitToSP", "Forward: keep this rank's chunk of a replicated tensor. Backward: all-gather the chunks' "
    "gradients.", split_dim, all_gather_dim)
GatherToReplicated = _dim_pair(
    "GatherToReplicated", "Forward: all-gather along ``dim`` into a tensor every rank then uses alike (replicated "
    "compute follows). Backward: keep this rank's chunk of the (identical) gradient.", all_gather_dim, split_dim)
