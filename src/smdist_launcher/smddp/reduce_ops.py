"""Reduce-op helpers: which ops a path can run natively, and AVG as SUM + divide.

gloo in torch 2.11 rejects ReduceOp.AVG and 2.13 mishandles it for integers, so the CPU
path always sends SUM and divides afterwards (integers truncate, as NCCL's ncclAvg does).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

ReduceOp = dist.ReduceOp


def is_op(opts_or_op: Any, op: Any) -> bool:
    """True when the options' (or the op's) reduce type is ``op`` (handles ReduceOp vs RedOpType)."""
    value = getattr(opts_or_op, "reduceOp", opts_or_op)
    try:
        return value == op
    except TypeError:  # pragma: no cover - very old torch
        return int(value) == int(op)


def op_name(opts_or_op: Any) -> str:
    """Lower-case name of a reduce op (``sum``, ``avg``, ...) for routing and messages."""
    value = getattr(opts_or_op, "reduceOp", opts_or_op)
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        if is_op(value, getattr(ReduceOp, name)):
            return name.lower()
    return str(value).lower()


def divide_in_place(tensors: list[torch.Tensor], divisor: int) -> None:
    """Finish an emulated AVG: floats divide exactly, integers truncate like ncclAvg."""
    for t in tensors:
        if t.is_floating_point() or t.is_complex():
            t.div_(divisor)
        else:
            t.copy_(torch.div(t, divisor, rounding_mode="trunc"))


def with_sum(opts: Any, options_type: type) -> Any:
    """A copy of ``opts`` (AllreduceOptions, ReduceScatterOptions, ReduceOptions) with SUM."""
    new = options_type()
    for field in ("rootRank", "rootTensor", "timeout", "asyncOp"):
        if hasattr(opts, field):
            try:
                setattr(new, field, getattr(opts, field))
            except (AttributeError, TypeError):
                pass
    new.reduceOp = ReduceOp.SUM
    return new
