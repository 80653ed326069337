"""Distributed checkpoints (torch.distributed.checkpoint) that load into a different parallel layout.

DCP stores each DTensor shard with its global offsets, so a checkpoint written at (TP=2, HSDP 2) loads at
(TP=1, FSDP 4) or into one process: ``load`` reshards on read. The names follow SMP v2's
``torch.sagemaker.distributed.checkpoint`` (``save``, ``async_save``, ``maybe_finalize_async_calls``, ``load``).
"""
from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict, set_state_dict)
from torch.optim import Optimizer

_PENDING: list[Future] = []


def save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike, process_group: Any = None,
         **kwargs: Any) -> Any:
    return dcp.save(state_dict, checkpoint_id=checkpoint_id, process_group=process_group, **kwargs)


def async_save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike, process_group: Any = None,
               **kwargs: Any) -> Future:
    """Stage to host memory and write in the background; call :func:`maybe_finalize_async_calls` later."""
    future = dcp.async_save(state_dict, checkpoint_id=checkpoint_id, process_group=process_group, **kwargs)
    _PENDING.append(future)
    return future


def maybe_finalize_async_calls(blocking: bool = True) -> int:
    """Wait for (or, non-blocking, reap finished) background saves; returns how many are still running."""
    for future in list(_PENDING):
        if blocking or future.done():
            future.result()
            _PENDING.remove(future)
    return len(_PENDING)


def load(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike, process_group: Any = None,
         **kwargs: Any) -> None:
    dcp.load(state_dict, checkpoint_id=checkpoint_id, process_group=process_group, **kwargs)


def _training_state(model: nn.Module, optimizer: Optimizer | None,
                    extra: dict[str, Any] | None) -> tuple[dict[str, Any], list[Optimizer]]:
    """The DCP state dict for model (+ optimizer, + small replicated extras) in their current layout."""
    optimizers = [] if optimizer is None else [optimizer]
    model_sd, optim_sd = get_state_dict(model, optimizers)
    state: dict[str, Any] = {"model": model_sd}
    if optimizer is not None:
        state["optim"] = optim_sd
    if extra:
        state["extra"] = dict(extra)
    return state, optimizers


def save_model(path: str | os.PathLike, model: nn.Module, optimizer: Optimizer | None = None,
               extra: dict[str, Any] | None = None) -> None:
    """Model (and optimizer) state, sharded as they are; ``extra`` holds small replicated values (e.g. step)."""
    state, _ = _training_state(model, optimizer, extra)
    dcp.save(state, checkpoint_id=os.fspath(path))


def load_model(path: str | os.PathLike, model: nn.Module, optimizer: Optimizer | None = None,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load into whatever layout ``model`` has now; returns ``extra`` filled from the checkpoint."""
    state, optimizers = _training_state(model, optimizer, extra)
    dcp.load(state, checkpoint_id=os.fspath(path))
    set_state_dict(model, optimizers, model_state_dict=state["model"],
                   optim_state_dict=state.get("optim", {}), options=StateDictOptions(strict=True))
    return state.get("extra", {})


def full_model_state(model: nn.Module) -> dict[str, Any]:
    """The unsharded state dict on every rank (for comparisons and export)."""
    return get_state_dict(model, [], options=StateDictOptions(full_state_dict=True, cpu_offload=False))[0] \
        if dist.is_initialized() else model.state_dict()
