"""What a tensor-parallel projection keeps for backward, made smaller (saved-tensor hooks around its matmul).

- A column-parallel projection's input under sequence parallelism is the all-gather of a norm's chunk: autograd
  kept the gathered tensor (TP x the chunk) for the weight gradient, in every block until backward. Megatron-LM
  keeps the chunk and gathers it again in backward; so does this: the gathered tensor carries a ``Regather``
  (its chunk, dimension, group) and a projection saving it packs the ``Regather`` instead (one all-gather in
  backward, shared by the projections reading the same norm output: q/k/v, gate/up).
- A weight cast for the forward (``unit_dp``'s mixed precision: bf16 copies of fp32 parameters) was kept by
  every matmul until backward: every block's cast weights alive at once (FSDP2 frees its unsharded copy after
  forward and gathers it again in backward). The cast carries a ``Recast`` (its source and dtype) and is packed
  as that; backward casts again.

Only where no other saved-tensor hooks are active (activation checkpointing and offloading install their own
and decide what is kept), and not while compiling.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.autograd.graph import saved_tensors_hooks

REGATHER_ATTR = "_smp_regather"
RECAST_ATTR = "_smp_recast"


class Regather:
    """A gathered activation's recipe: the chunk (kept), dimension and group; in backward the first unpack
    gathers (or waits for the gather ``prefetch`` started), the others of the same forward reuse it, the last one
    lets it go."""

    def __init__(self, chunk: torch.Tensor, dim: int, group: Any) -> None:
        self.chunk, self.dim, self.group = chunk, dim, group
        self.packs = 0
        self.unpacks = 0
        self.full: torch.Tensor | None = None
        self._pending: tuple[torch.Tensor, Any] | None = None
        self.prefetched = False  # the backward's gather was the one prefetch started

    def prefetch(self) -> None:
        """Start the all-gather now (asynchronously: it overlaps the backward of what came between the norm and
        the row projection whose backward calls this), if a projection packed this recipe."""
        if self.packs > self.unpacks and self.full is None and self._pending is None:
            from .collectives import all_gather_start
            self._pending = all_gather_start(self.chunk, self.group, async_op=True)

    def get(self) -> torch.Tensor:
        from .collectives import all_gather_dim, all_gather_finish
        full = self.full
        if full is None:
            if self._pending is not None:
                out, work = self._pending
                self._pending = None
                self.prefetched = True
                work.wait()
                full = all_gather_finish(out, self.dim, self.group)
            else:
                full = all_gather_dim(self.chunk, self.dim, self.group)
        self.unpacks += 1
        self.full = None if self.unpacks >= self.packs else full
        return full


class PrefetchOnBackward(torch.autograd.Function):
    """Identity; its backward starts a ``Regather``'s all-gather (placed on a row projection's output: the
    backward reaches it before the attention/MLP backward that ends in the column projections needing it)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, regather: Regather) -> torch.Tensor:
        ctx.regather = regather
        return y.view_as(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        ctx.regather.prefetch()
        return grad, None


class Recast:
    def __init__(self, source: torch.Tensor, dtype: torch.dtype) -> None:
        self.source, self.dtype = source, dtype

    def get(self) -> torch.Tensor:
        return self.source.to(self.dtype)


def mark_gathered(full: torch.Tensor, chunk: torch.Tensor, dim: int, group: Any) -> Regather:
    regather = Regather(chunk.detach(), dim, group)
    setattr(full, REGATHER_ATTR, regather)
    return regather


def mark_cast(cast: torch.Tensor, source: torch.Tensor) -> None:
    setattr(cast, RECAST_ATTR, Recast(source.detach(), cast.dtype))


class _Packed:
    __slots__ = ("recipe", "size", "stride", "offset")

    def __init__(self, recipe: Regather | Recast, t: torch.Tensor) -> None:
        self.recipe, self.size, self.stride, self.offset = recipe, t.size(), t.stride(), t.storage_offset()


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def hooks_apply() -> bool:
    return (not torch.compiler.is_compiling()
            and torch._C._autograd._top_saved_tensors_default_hooks(False) is None)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           f: Any = torch.nn.functional.linear) -> torch.Tensor:
    """``f(x, weight, bias)`` saving recipes instead of the marked input/weight (see the module docstring)."""
    regather: Regather | None = getattr(x, REGATHER_ATTR, None)
    recast: Recast | None = getattr(weight, RECAST_ATTR, None)
    if (regather is None and recast is None) or not hooks_apply():
        return f(x, weight, bias)
    targets: list[tuple[int, int, Regather | Recast]] = []
    if regather is not None:
        targets.append((_storage(x), x.untyped_storage().nbytes(), regather))
    if recast is not None:
        targets.append((_storage(weight), weight.untyped_storage().nbytes(), recast))

    def pack(t: torch.Tensor) -> Any:
        if t.device.type != "meta":
            ptr, nbytes = _storage(t), t.untyped_storage().nbytes()
            for p, n, recipe in targets:
                if ptr == p and nbytes == n:
                    if isinstance(recipe, Regather):
                        recipe.packs += 1
                    return _Packed(recipe, t)
        return t

    def unpack(packed: Any) -> torch.Tensor:
        if isinstance(packed, _Packed):
            return packed.recipe.get().as_strided(packed.size, packed.stride, packed.offset)
        return packed

    with saved_tensors_hooks(pack, unpack):
        return f(x, weight, bias)
