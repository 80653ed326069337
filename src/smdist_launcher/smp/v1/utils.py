"""``smdistributed.modelparallel.torch.utils``: helpers scripts import from SMP's utils module."""
from __future__ import annotations

from typing import Any

from torch.distributed.tensor import DTensor, Shard


def get_distribution_axis(obj: Any) -> int | None:
    """The dimension along which a tensor-parallel parameter/buffer is split over the tp group; None when it is not
    split (replicated tensors, plain tensors, None, anything else), as in SMP.

    Tensor parallelism here stores split tensors as DTensors on the tp mesh, so the axis is their Shard dim
    (nn.Linear weights and biases: 0, the output features; nn.Embedding weights: 1, the embedding dim).
    """
    if not isinstance(obj, DTensor):
        return None
    for placement in obj.placements:
        if isinstance(placement, Shard):
            return placement.dim % obj.dim() if obj.dim() else placement.dim
    return None


__all__ = ["get_distribution_axis"]
