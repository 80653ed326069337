"""``tsm.init`` / ``tsm.transform`` and the FSDP2 helper that follows ``hybrid_shard_degree``."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import parallelize_module

from . import fsdp1, offload_wrapper_patch, process_group, teardown
from .activation_checkpoint import block_names
from .config import check_against_world, load_config, raw_parameters
from .mesh import build_mesh, layout_for
from .state import SMPState, state
from .tensor_parallel import local_modules, unit_dp, vocab_parallel_loss
from .tensor_parallel.transformer import mark_transformer_layers
from .tp_plan import TPPlan, check_head_split, divide_head_counts, find_blocks, infer_plan

log = logging.getLogger("smdist_launcher.smp")


def init(config: str | Mapping[str, Any] | None = None) -> SMPState:
    """Read the SMP config, join the process group, build the (replicate, shard, tp) device mesh."""
    cfg = load_config(config)
    _, where = raw_parameters(config)
    process_group.ensure_initialized()
    world = dist.get_world_size()
    check_against_world(cfg, world, where)
    layout = layout_for(cfg, world)
    state.cfg = cfg
    state.rank = dist.get_rank()
    state.world_size = world
    state.local_rank = process_group.local_rank()
    state.layout = layout
    state.device_mesh = build_mesh(layout, process_group.device_type())
    state.world_process_group = dist.group.WORLD
    state.initialized = True
    teardown.release_at_exit(state, _forget_world_group)
    fsdp1.install()
    offload_wrapper_patch.install()
    if cfg.random_seed is not None:
        # Same seed everywhere: replicas must start identical (FSDP2 does not broadcast).
        torch.manual_seed(cfg.random_seed)
    for key in ("context_parallel_degree", "expert_parallel_degree"):
        if getattr(cfg, key) > 1:
            log.warning("smp: %s=%d is accepted but not implemented by this runtime; it runs as 1",
                        key, getattr(cfg, key))
    return state


def _forget_world_group(st: SMPState) -> None:
    st.world_process_group = None


def is_initialized() -> bool:
    return state.initialized


def _require_init() -> None:
    if not state.initialized:
        raise RuntimeError("smp: call tsm.init() (torch.sagemaker.init) before tsm.transform()")


def transform(model: nn.Module, device: torch.device | str | None = None, dtype: torch.dtype | None = None,
              config: Any = None, load_state_dict_from_rank0: bool = False, sequence_parallel: bool = True,
              plan: TPPlan | None = None, **_: Any) -> nn.Module:
    """Apply tensor parallelism (tensor_parallel_degree > 1) with a plan inferred from module names.

    ``config`` (SMP's MoE config) is accepted and ignored: expert parallelism is not implemented.
    Parameters created on the meta device stay there (delayed init); ``materialize`` them after sharding.
    """
    _require_init()
    if dtype is not None:
        model = model.to(dtype=dtype)
    if device is not None and not any(p.is_meta for p in model.parameters()):
        model = model.to(device=device)
    tp = state.tensor_parallel_degree
    if tp > 1:
        chosen = plan or infer_plan(model, sequence_parallel=sequence_parallel)
        if not chosen.styles:
            raise ValueError("smp: tensor_parallel_degree > 1 but no module of the model matches a tensor-parallel "
                             "plan (attention/MLP projection names or chained nn.Linear layers); pass plan=")
        check_head_split(model, chosen, tp)
        if plan is None:
            # Inferred plans run on local tensors with explicit collectives (see tensor_parallel.local_modules);
            # a caller's own plan= goes through DTensor's parallelize_module as given.
            chosen.sequence_parallel = local_modules.apply(model, chosen.styles, chosen.blocks,
                                                           chosen.sequence_parallel, state.tp_mesh)
            # a causal LM called with labels: its loss over each rank's vocabulary slice (no logits gather)
            vocab_parallel_loss.install(model)
        else:
            parallelize_module(model, state.tp_mesh, chosen.styles)
        divide_head_counts(model, chosen.attention_modules, tp)
        cast(Any, model)._smp_tp_plan = chosen
    # Scripts select SMP's blocks with isinstance(m, TransformerLayer) (auto-wrap and checkpointing policies).
    mark_transformer_layers(model, find_blocks(model))
    return model


def shard_model(model: nn.Module, blocks: list[str] | None = None, mp_policy: MixedPrecisionPolicy | None = None,
                reshard_after_forward: bool = True, **kwargs: Any) -> nn.Module:
    """FSDP2 ``fully_shard`` on each block, then the root, over tsm.state's data-parallel mesh.

    hybrid_shard_degree 0 gives 1-D FSDP over all data-parallel ranks; N gives HSDP (2-D mesh,
    shard over N, replicate across the rest); 1 replicates only. With tensor parallelism over every rank (a
    one-rank data-parallel mesh) there is nothing to shard: the mixed precision alone, without FSDP2's hooks
    (``tensor_parallel.unit_dp``; TPOptions.unit_dp_without_fsdp, unless FSDP2 keywords are passed).
    """
    _require_init()
    if hasattr(model, unit_dp.ATTR):  # FSDP2's fully_shard refuses a second call too; this one doubled every cast
        raise RuntimeError("smp: shard_model was already applied to this model (tensor parallelism over every "
                           "rank: mixed precision without FSDP2); call it once per model")
    names = block_names(model) if blocks is None else blocks
    policy = mp_policy or MixedPrecisionPolicy()
    if _unit_dp_applies(model, kwargs):
        # every rank is a TP rank: FSDP2 over a one-rank mesh would only add host work (see unit_dp)
        return unit_dp.install(model, names, policy, state.tp_mesh)
    mesh = state.dp_mesh
    for i, name in enumerate(names):
        # The last block is all-gathered again at the start of backward anyway.
        reshard = reshard_after_forward and i < len(names) - 1
        fully_shard(model.get_submodule(name), mesh=mesh, mp_policy=policy, reshard_after_forward=reshard, **kwargs)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward, **kwargs)
    return model


def _unit_dp_applies(model: nn.Module, kwargs: Mapping[str, Any]) -> bool:
    """Tensor parallelism on every rank through the local modules (an inferred plan), no FSDP2 option that
    matters (offloading, ...): mixed precision alone, without FSDP2."""
    return (local_modules.OPTIONS.unit_dp_without_fsdp and state.tensor_parallel_degree > 1 and state.dp_size == 1
            and bool(local_modules.local_tp_modules(model)) and not kwargs)
