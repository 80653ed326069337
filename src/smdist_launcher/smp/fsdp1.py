"""PyTorch FSDP (``FullyShardedDataParallel``, FSDP1) under SMP v2: after ``tsm.init``, an FSDP built without a
process group or device mesh shards over SMP's groups, as SMP v2's scripts expect.

What the config decides (SMP v2's rules for ``hybrid_shard_degree``):
- ``hybrid_shard_degree`` N with 0 < N < data-parallel size: shard over N ranks, replicate across the rest
  (FULL_SHARD becomes HYBRID_SHARD, SHARD_GRAD_OP becomes _HYBRID_SHARD_ZERO2);
- 0 with FULL_SHARD: shard over all data-parallel ranks; 0 with HYBRID_SHARD: shard within a host;
- ``tensor_parallel_degree`` > 1: ``tsm.transform``'s modules (inferred plans) hand FSDP their local shards as plain
  parameters over the data-parallel groups; DTensor parameters from a caller's own ``plan=`` get the data-parallel
  slice of SMP's device mesh instead (FSDP's DTensor extension, 2-D).
Also accepts SMP's ``post_param_init_fn`` keyword (called on the wrapped model once it is built).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, cast

from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy

from . import process_group as pg
from .logger import get_logger
from .state import relayout, state
from .tensor_parallel import local_modules

_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
_TO_HYBRID = {ShardingStrategy.FULL_SHARD: ShardingStrategy.HYBRID_SHARD,
              ShardingStrategy.SHARD_GRAD_OP: ShardingStrategy._HYBRID_SHARD_ZERO2}
_FROM_HYBRID = {v: k for k, v in _TO_HYBRID.items()}
_original_init: Callable[..., None] | None = None


def _native_hybrid_shard(dp: int, tp: int) -> int:
    """SMP's HYBRID_SHARD with hybrid_shard_degree 0: shard within a host (its data-parallel ranks)."""
    per_host = max(1, pg.local_size() // tp)
    return math.gcd(per_host, dp)


def resolve(sharding_strategy: ShardingStrategy | None,
            dtensor_params: bool = True) -> tuple[ShardingStrategy, dict[str, Any]]:
    """The strategy and the process_group / device_mesh keyword FSDP gets from tsm.state (a device mesh only where
    FSDP must see tensor-parallel DTensor parameters)."""
    strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
    layout = state.layout
    assert layout is not None
    if strategy in _HYBRID and state.cfg.hybrid_shard_degree == 0:
        shard = _native_hybrid_shard(layout.dp, layout.tp)
        if shard != layout.shard:
            relayout(shard)
            layout = state.layout
            assert layout is not None
    if strategy != ShardingStrategy.NO_SHARD:
        if layout.replicate > 1 and strategy in _TO_HYBRID:
            strategy = _TO_HYBRID[strategy]
        elif layout.replicate == 1 and strategy in _FROM_HYBRID:
            strategy = _FROM_HYBRID[strategy]  # nothing to replicate across: the same math without a second group
    mesh = state.device_mesh
    assert mesh is not None
    if layout.tp > 1 and dtensor_params:
        if strategy in _HYBRID:
            return strategy, {"device_mesh": mesh["replicate", "shard"]}
        return strategy, {"device_mesh": state.dp_flat_mesh}
    if strategy in _HYBRID:
        return strategy, {"process_group": (state.shard_process_group, state.replicate_process_group)}
    return strategy, {"process_group": state.rep_rank_process_group}


def _tp_sharded_names(module: nn.Module) -> frozenset[str]:
    from torch.distributed.tensor import DTensor, Shard

    from .grad_norm import _clean
    return frozenset(_clean(n) for n, p in module.named_parameters()
                     if isinstance(p, DTensor) and any(isinstance(pl, Shard) for pl in p.placements))


def install() -> None:
    """Idempotent: route FSDP's constructor through :func:`resolve` while tsm is initialized."""
    global _original_init
    if _original_init is not None:
        return
    original = FullyShardedDataParallel.__init__
    _original_init = original

    @functools.wraps(original)
    def __init__(self: FullyShardedDataParallel, module: nn.Module, process_group: Any = None,
                 sharding_strategy: ShardingStrategy | None = None, *args: Any,
                 post_param_init_fn: Callable[[nn.Module], None] | None = None, **kwargs: Any) -> None:
        tp = state.initialized and state.tensor_parallel_degree > 1
        # tsm.transform's modules compute on local shards: FSDP1 flattens those as plain tensors over the
        # data-parallel groups (with DTensors, use_orig_params=True failed writing back global-shape views).
        local_tp = tp and bool(local_modules.local_tp_modules(module))
        if local_tp:
            local_modules.to_local_parameters(module)
        # DTensor parameters (a caller's own plan=): clip_grad_norm_ needs their names; local ones, the modules' roles
        tp_sharded = _tp_sharded_names(module) if tp and not local_tp else None
        if state.initialized and process_group is None and kwargs.get("device_mesh") is None and not args:
            chosen, groups = resolve(sharding_strategy, dtensor_params=not local_tp)
            if chosen != (sharding_strategy or ShardingStrategy.FULL_SHARD):
                get_logger().debug("smp: FSDP sharding_strategy %s -> %s (hybrid_shard_degree=%d)",
                                   sharding_strategy, chosen, state.cfg.hybrid_shard_degree)
            sharding_strategy = chosen
            process_group = groups.pop("process_group", None)
            kwargs.update(groups)
        original(self, module, process_group, sharding_strategy, *args, **kwargs)
        if tp_sharded is not None:
            cast(Any, self)._smp_tp_sharded_fqns = tp_sharded  # for tsm's clip_grad_norm_
        if post_param_init_fn is not None:
            post_param_init_fn(self)

    FullyShardedDataParallel.__init__ = __init__  # type: ignore[method-assign]


def uninstall() -> None:
    global _original_init
    if _original_init is not None:
        FullyShardedDataParallel.__init__ = _original_init  # type: ignore[method-assign]
        _original_init = None
