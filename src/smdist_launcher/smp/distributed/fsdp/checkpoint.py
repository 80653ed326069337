"""``torch.sagemaker.distributed.fsdp.checkpoint``: save/load an FSDP model with its optimizer, scheduler and
small extra values, over the process groups SMP scripts pass as ``(process_group, coordinator_rank, is_action_rank)``.

Sharded checkpoints are DCP folders written by one replica (the action ranks) over its shard group and read by
every replica; the model/optimizer state dicts come from ``torch.distributed.checkpoint.state_dict`` (which
also initializes empty optimizer state before loading). Full checkpoints are one ``torch.save`` file on rank 0.
FSDP1 over tsm.transform's local TP pieces: local_tp_checkpoint.py.
"""
from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.fsdp import StateDictType

from . import local_tp_checkpoint as local_tp

EXPORT_KEY_MODEL = "model"
EXPORT_KEY_OPTIMIZER = "optimizer"
EXPORT_KEY_SCHEDULER = "scheduler"
EXPORT_KEY_IDENTITY = "identity"
FULL_CHECKPOINT_FILE = "model.pt"


def _metadata(model: nn.Module, pg_metadata: Any) -> tuple[Any, int, bool]:
    from ...state import state
    if state.initialized and state.tensor_parallel_degree > 1:
        # The state dict's DTensors span the TP ranks too: every rank takes part, over the world (DCP writes
        # each distinct shard once), whatever group the script passes for FSDP alone.
        return None, 0, True
    if pg_metadata is not None:
        group, coordinator, action = pg_metadata
        return group, coordinator, bool(action)
    from ...utils.process_group_utils import get_global_ranks
    group = getattr(model, "process_group", None)
    ranks = get_global_ranks(group)
    return group, min(ranks), state.ranker.get_rep_rank(dist.get_rank()) == 0


def _optimizers(optimizer: Any) -> list[Any]:
    return [] if optimizer is None else [optimizer]


def save_model_checkpoint(model: nn.Module, state_dict_type: StateDictType, path: str | os.PathLike,
                          sharding_strategy: Any = None, pg_metadata: Any = None, log: bool = False,
                          optimizer: Any = None, scheduler: Any = None,
                          extra_exports: dict[str, Any] | None = None) -> None:
    """Write ``path``: a DCP folder (SHARDED_STATE_DICT) or ``path/model.pt`` from rank 0 (FULL_STATE_DICT)."""
    path = os.fspath(path)
    split_tp = local_tp.uses_local_tp(model)
    if state_dict_type == StateDictType.FULL_STATE_DICT:
        # FSDP1's offload_to_cpu on tensors already in host memory crashes (use-after-free in its clone path);
        # with local TP pieces every rank needs its full-per-TP-rank copy to gather the whole tensors
        options = StateDictOptions(full_state_dict=True, cpu_offload=torch.cuda.is_available() and not split_tp)
        model_sd, optim_sd = get_state_dict(model, _optimizers(optimizer), options=options)
        if split_tp:  # whole tensors, in host memory, on rank 0 (which writes them)
            local_tp.gather_full(model, model_sd, optim_sd, writer=0)
        if dist.get_rank() == 0:
            os.makedirs(path, exist_ok=True)
            payload: dict[str, Any] = {EXPORT_KEY_MODEL: model_sd, EXPORT_KEY_IDENTITY: dict(extra_exports or {})}
            if optimizer is not None:
                payload[EXPORT_KEY_OPTIMIZER] = optim_sd
            if scheduler is not None:
                payload[EXPORT_KEY_SCHEDULER] = scheduler.state_dict()
            torch.save(payload, os.path.join(path, FULL_CHECKPOINT_FILE))
        dist.barrier()
        return
    if state_dict_type not in (StateDictType.SHARDED_STATE_DICT, StateDictType.LOCAL_STATE_DICT):
        raise ValueError(f"smp checkpoint: state_dict_type {state_dict_type} is not supported; use "
                         "StateDictType.SHARDED_STATE_DICT or StateDictType.FULL_STATE_DICT")
    group, _, action = _metadata(model, pg_metadata)
    if split_tp:  # one folder per TP rank, over its FSDP group
        path = local_tp.rank_folder(path)
        group, action = local_tp.dcp_group(model, pg_metadata)
    model_sd, optim_sd = get_state_dict(model, _optimizers(optimizer))
    payload = {EXPORT_KEY_MODEL: model_sd, EXPORT_KEY_IDENTITY: dict(extra_exports or {})}
    if optimizer is not None:
        payload[EXPORT_KEY_OPTIMIZER] = optim_sd
    if scheduler is not None:
        payload[EXPORT_KEY_SCHEDULER] = scheduler.state_dict()
    if action:  # one replica writes; the others hold the same shards
        dcp.save(payload, checkpoint_id=path, process_group=group)
    dist.barrier()


def load_model_checkpoint(model: nn.Module, state_dict_type: StateDictType, path: str | os.PathLike,
                          sharding_strategy: Any = None, pg_metadata: Any = None, log: bool = False,
                          optimizer: Any = None, scheduler: Any = None,
                          extra_imports: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load what :func:`save_model_checkpoint` wrote into ``model`` (and optimizer, scheduler), in place;
    returns ``{EXPORT_KEY_MODEL: model, ..., EXPORT_KEY_IDENTITY: the extra values}``."""
    path = os.fspath(path)
    split_tp = local_tp.uses_local_tp(model)
    optimizers = _optimizers(optimizer)
    if state_dict_type == StateDictType.FULL_STATE_DICT:
        if split_tp:
            raise NotImplementedError(
                "smp checkpoint: loading a FULL_STATE_DICT into FSDP1 over tensor-parallel pieces is not supported "
                "by this runtime; resume from a SHARDED_STATE_DICT checkpoint (one folder per TP rank), or load the "
                "full model.pt into the model before tsm.transform/FSDP")
        payload = torch.load(os.path.join(path, FULL_CHECKPOINT_FILE), map_location="cpu", weights_only=False)
        set_state_dict(model, optimizers, model_state_dict=payload[EXPORT_KEY_MODEL],
                       optim_state_dict=payload.get(EXPORT_KEY_OPTIMIZER, {}),
                       options=StateDictOptions(full_state_dict=True, strict=True))
        identity = payload.get(EXPORT_KEY_IDENTITY, {})
        sched = payload.get(EXPORT_KEY_SCHEDULER)
    else:
        group, _, _ = _metadata(model, pg_metadata)
        if split_tp:
            path = local_tp.rank_folder(path)
            group, _ = local_tp.dcp_group(model, pg_metadata)
        model_sd, optim_sd = get_state_dict(model, optimizers)
        payload = {EXPORT_KEY_MODEL: model_sd, EXPORT_KEY_IDENTITY: dict(extra_imports or {})}
        if optimizer is not None:
            payload[EXPORT_KEY_OPTIMIZER] = optim_sd
        if scheduler is not None:
            payload[EXPORT_KEY_SCHEDULER] = scheduler.state_dict()
        dcp.load(payload, checkpoint_id=path, process_group=group)
        set_state_dict(model, optimizers, model_state_dict=payload[EXPORT_KEY_MODEL],
                       optim_state_dict=payload.get(EXPORT_KEY_OPTIMIZER, {}))
        identity = payload[EXPORT_KEY_IDENTITY]
        sched = payload.get(EXPORT_KEY_SCHEDULER)
    if scheduler is not None and sched is not None:
        scheduler.load_state_dict(sched)
    return {EXPORT_KEY_MODEL: model, EXPORT_KEY_OPTIMIZER: optimizer, EXPORT_KEY_SCHEDULER: scheduler,
            EXPORT_KEY_IDENTITY: identity}
