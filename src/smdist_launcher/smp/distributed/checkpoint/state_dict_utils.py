"""``torch.sagemaker.distributed.checkpoint.state_dict_utils``: SMP's local (per-rank) checkpoints.

Inside ``sm_state_dict_type(model, SMStateDictType.SM_LOCAL_STATE_DICT)``, ``model.state_dict()`` and
``optimizer.state_dict()`` give this rank's own shards as plain tensors that share storage with the parameters
and the optimizer's state, gathered without any collective (FSDP's own LOCAL_STATE_DICT builds ShardedTensors,
which talks to every rank). ``state_dict_loader.load`` then fills them in place, so resuming needs no
load_state_dict; it also puts back the optimizer's hyperparameters (learning rates: not tensors). As with SMP, such
a checkpoint loads only into the same shard degree and TP degree. torch's ``StateDictType`` values are handed to
``FSDP.state_dict_type`` (FSDP1 models) or served through torch's state-dict API (FSDP2 and plain models).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import Enum
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType
from torch.optim import Optimizer

__all__ = ["SMStateDictType", "LocalOptimizerState", "init_optim_state", "sm_state_dict_type"]


class SMStateDictType(Enum):
    SM_LOCAL_STATE_DICT = "sm_local_state_dict"


class LocalOptimizerState(dict):
    """An optimizer's local state dict that remembers its optimizer (the loader restores its param groups)."""

    optimizer: Optimizer


def _local(t: torch.Tensor) -> torch.Tensor:
    local = t.to_local() if hasattr(t, "to_local") else t   # a DTensor (FSDP2, TP): this rank's part
    return local.detach()


def _local_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    # named_parameters are FSDP1's sharded flat params (or their use_orig_params views) and FSDP2's DTensors as they
    # are between steps: this rank's shards, without FSDP's state-dict hooks. Empty shards hold nothing to save.
    out = {name: _local(p) for name, p in model.named_parameters()}
    out.update({name: _local(b) for name, b in model.named_buffers()})
    return {k: v for k, v in out.items() if v.numel()}


def _local_optimizer_state(optimizer: Optimizer, plain: Any) -> LocalOptimizerState:
    state = plain(optimizer)
    state["state"] = {idx: {k: _local(v) if isinstance(v, torch.Tensor) else v for k, v in per_param.items()}
                      for idx, per_param in state["state"].items()}
    out = LocalOptimizerState(state)
    out.optimizer = optimizer
    return out


def _full_or_sharded(model: nn.Module, kind: StateDictType, config: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = kind == StateDictType.FULL_STATE_DICT
    options = StateDictOptions(full_state_dict=full, cpu_offload=bool(getattr(config, "offload_to_cpu", False)))
    return lambda *args, **kwargs: get_model_state_dict(model, options=options)


@contextlib.contextmanager
def sm_state_dict_type(model: nn.Module, state_dict_type: SMStateDictType | StateDictType,
                       state_dict_config: Any = None, optim_state_dict_config: Any = None) -> Iterator[None]:
    """Within the block, ``model.state_dict()`` (and for SM_LOCAL_STATE_DICT ``optimizer.state_dict()``) give
    state dicts of ``state_dict_type``."""
    if isinstance(state_dict_type, StateDictType):
        if isinstance(model, FSDP):
            with FSDP.state_dict_type(model, state_dict_type, state_dict_config, optim_state_dict_config):
                yield
            return
        if state_dict_type == StateDictType.LOCAL_STATE_DICT:
            state_dict_type = SMStateDictType.SM_LOCAL_STATE_DICT
        else:
            with _patched(model, "state_dict", _full_or_sharded(model, state_dict_type, state_dict_config)):
                yield
            return
    if state_dict_type != SMStateDictType.SM_LOCAL_STATE_DICT:
        raise ValueError(f"sm_state_dict_type: unknown state dict type {state_dict_type!r}; use "
                         "SMStateDictType.SM_LOCAL_STATE_DICT or one of torch's StateDictType values")
    plain = Optimizer.state_dict
    with _patched(model, "state_dict", lambda *args, **kwargs: _local_model_state(model)), \
            _patched(Optimizer, "state_dict", lambda self: _local_optimizer_state(self, plain)):
        yield


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    had = name in vars(owner)
    old = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


def init_optim_state(optimizer: Optimizer, skip_empty_param: bool = False) -> None:
    """Create the optimizer's state (moments, step) so that a local checkpoint can be loaded into it: one step on
    zero gradients, with every parameter put back afterwards (weight decay and momentum leave no trace)."""
    params = [p for group in optimizer.param_groups for p in group["params"]
              if p.requires_grad and not (skip_empty_param and p.numel() == 0)]
    saved = [(p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    with torch.no_grad():
        for p, (value, grad) in zip(params, saved, strict=True):
            p.copy_(value)
            p.grad = grad
