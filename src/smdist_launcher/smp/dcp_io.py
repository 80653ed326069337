"""Distributed checkpoints (torch.distributed.checkpoint) that load into a different parallel layout.

DCP stores each DTensor shard with its global offsets, so a checkpoint written at (TP=2, HSDP 2) loads at
(TP=1, FSDP 4) or into one process: ``load`` reshards on read. The names follow SMP v2's
``torch.sagemaker.distributed.checkpoint`` (``save``, ``async_save``, ``maybe_finalize_async_calls``, ``load``).
"""
from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any, cast

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.optim import Optimizer

_PENDING: list[Future] = []
class _Twins(dict):
    """rank list -> a gloo group over the same ranks (see _cpu_capable); a class so that teardown can hold a weak
    reference to it."""


_CPU_TWINS = _Twins()


def _cpu_capable(process_group: Any) -> Any:
    """A group DCP can write in the background with: the given one when it has a CPU backend, else a gloo group
    over the same ranks. GPU scripts make NCCL-only groups (init_process_group("nccl"), dist.new_group(ranks)), and
    DCP's async_save runs its planning collectives from a background thread on CPU. The twin is made by the group's
    own members only (use_local_synchronization: every member calls async_save with it, in the same order)."""
    if not dist.is_initialized():
        return process_group
    group = cast(dist.ProcessGroup, process_group if process_group is not None else dist.group.WORLD)
    if torch.device("cpu") in group._device_types:
        return process_group
    ranks = tuple(dist.get_process_group_ranks(group))
    if ranks not in _CPU_TWINS:
        if not _CPU_TWINS:
            from .teardown import release_at_exit

            release_at_exit(_CPU_TWINS, _Twins.clear)  # their gloo threads are joined before finalization
        _CPU_TWINS[ranks] = dist.new_group(list(ranks), backend="gloo", use_local_synchronization=True)
    return _CPU_TWINS[ranks]


def _group_members(process_group: Any, coordinator_rank: int | None) -> None:
    """SMP passes the coordinator as a global rank; DCP picks the group's first rank, which is the same rank
    for groups built from sorted rank lists (FSDP's and tsm.state's). Refuse a coordinator outside the group."""
    if coordinator_rank is None or process_group is None or not dist.is_initialized():
        return
    ranks = dist.get_process_group_ranks(process_group)
    if coordinator_rank not in ranks:
        raise ValueError(f"smp checkpoint: coordinator_rank={coordinator_rank} is not a member of the process group "
                         f"(ranks {ranks}); pass min(get_global_ranks(process_group))")


def _storage(checkpoint_id: Any, writer: Any, reader: Any, *, write: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(checkpoint_id, str) and checkpoint_id.startswith("s3://") and writer is None and reader is None:
        # SMP takes s3:// checkpoint ids directly (its S3 writer and reader)
        from .distributed.checkpoint import s3_filesystem

        if write:
            return {"storage_writer": s3_filesystem.S3FileSystemWriter(checkpoint_id)}
        return {"storage_reader": s3_filesystem.S3FileSystemReader(checkpoint_id)}
    if checkpoint_id is not None:
        out["checkpoint_id"] = os.fspath(checkpoint_id)
    if writer is not None:
        out["storage_writer"] = writer
    if reader is not None:
        out["storage_reader"] = reader
    if not out:
        raise ValueError("smp checkpoint: pass checkpoint_id=<directory> or a storage_writer/storage_reader")
    return out


def save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None, storage_writer: Any = None,
         planner: Any = None, process_group: Any = None, coordinator_rank: int | None = None, queue: Any = None,
         **_: Any) -> Any:
    """SMP's ``state_dict_saver.save``: every rank of ``process_group`` writes its shards (DCP)."""
    _group_members(process_group, coordinator_rank)
    return dcp.save(state_dict, process_group=process_group, planner=planner,
                    **_storage(checkpoint_id, storage_writer, None, write=True))


def async_save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None,
               storage_writer: Any = None, planner: Any = None, process_group: Any = None,
               coordinator_rank: int | None = None, queue: Any = None, sharded_strategy: Any = None,
               **_: Any) -> Future:
    """Stage to host memory and write in the background; finalize with :func:`maybe_finalize_async_calls`, or,
    when ``queue`` (SMP's ``async_utils.AsyncCallsQueue``) is given, with ``queue.maybe_finalize_async_calls``.
    A ``sharded_strategy`` (``state_dict_saver.PyTorchDistSaveShardedStrategy``) sets the writer's threads."""
    _group_members(process_group, coordinator_rank)
    storage = _storage(checkpoint_id, storage_writer, None, write=True)
    thread_count = getattr(sharded_strategy, "thread_count", None)
    if thread_count and "checkpoint_id" in storage and "storage_writer" not in storage:
        storage = {"storage_writer": dcp.FileSystemWriter(storage["checkpoint_id"], thread_count=int(thread_count))}
    # no async_stager: dcp returns a plain Future, not an AsyncSaveResponse
    future = cast(Future, dcp.async_save(state_dict, process_group=_cpu_capable(process_group), planner=planner,
                                         **storage))
    from .distributed.checkpoint.async_utils import AsyncCallsQueue

    if isinstance(queue, AsyncCallsQueue):
        queue._track(future)  # the script finalizes through its queue (SMP v2 shared-scripts' checkpoints.py)
    else:
        _PENDING.append(future)
    return future


def maybe_finalize_async_calls(blocking: bool = True, process_group: Any = None, **_: Any) -> int:
    """Wait for (or, non-blocking, reap finished) background saves; returns how many are still running."""
    for future in list(_PENDING):
        if blocking or future.done():
            future.result()
            _PENDING.remove(future)
    return len(_PENDING)


def load(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None, storage_reader: Any = None,
         planner: Any = None, process_group: Any = None, coordinator_rank: int | None = None, **_: Any) -> None:
    """SMP's ``state_dict_loader.load``: fills ``state_dict`` in place, resharding into its current layout."""
    _group_members(process_group, coordinator_rank)
    dcp.load(state_dict, process_group=process_group, planner=planner, **_storage(checkpoint_id, None, storage_reader))
    _restore_local_optimizers(state_dict)


def _restore_local_optimizers(state_dict: Any) -> None:
    """Local optimizer state dicts (state_dict_utils) were filled in place, tensors and all; what is not a tensor
    (learning rate, betas, ...) lives in param_groups, which the optimizer only takes back from us."""
    from .distributed.checkpoint.state_dict_utils import LocalOptimizerState

    values = state_dict.values() if isinstance(state_dict, dict) else ()
    for value in values:
        if isinstance(value, LocalOptimizerState):
            for group, saved in zip(value.optimizer.param_groups, value.get("param_groups") or [], strict=False):
                group.update({k: v for k, v in saved.items() if k != "params"})
        elif isinstance(value, dict):
            _restore_local_optimizers(value)


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
