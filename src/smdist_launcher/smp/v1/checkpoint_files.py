"""``smp.save_checkpoint`` / ``smp.resume_from_checkpoint``: SMP v1's checkpoint folder layout.

    path/
      <tag>_partial/model_<pp>_<tp>.pt, optimizer_<pp>_<tp>.pt, user_content.pt   (partial=True)
      <tag>, user_content_<tag>                                                 (partial=False: full model)
      newest                                                                    (the newest tag)

Partial files hold this rank's local shards. Every rank writes its own (pp, tp) file, by an atomic rename: the
data-parallel replicas write identical bytes, so on a shared filesystem one of them wins whole, and on per-host
disks (each SageMaker instance's /opt/ml/checkpoints) every host has what its ranks need to resume. A full
checkpoint is the whole model's state dict (tensor-parallel shards gathered, pipeline stages merged), written the
same way by the first rank of each host; the model's own keys are kept, so a Hugging Face model's full checkpoint
is already in Hugging Face's keys.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..process_group import local_rank
from .checkpoint import _gather_full, _local
from .notices import warn_once
from .state import state

NEWEST = "newest"


def _rank_info() -> str:
    topo = state.topo()
    return f"{topo.pp_rank}_{topo.tp_rank}"


def _full_model_state(model: Any) -> dict[str, Any]:
    """Every stage's tensors, full size, on every rank (a collective over the world)."""
    mine = _gather_full(model.local_state_dict())
    topo = state.topo()
    if topo.pp == 1:
        return mine
    parts: list[Any] = [None] * topo.pp
    dist.all_gather_object(parts, mine, group=topo.group("pp"))
    merged: dict[str, Any] = {}
    for part in parts:
        merged.update(part)
    return merged


def save_checkpoint(path: str | os.PathLike, tag: str, partial: bool = True, model: Any = None, optimizer: Any = None,
                    user_content: Any = None, translate_if_full: bool = True,
                    num_kept_partial_checkpoints: int | None = None) -> None:
    """Call on every rank with the same tag."""
    root = Path(path)
    host_first = local_rank() == 0
    root.mkdir(parents=True, exist_ok=True)
    if partial:
        folder = root / f"{tag}_partial"
        folder.mkdir(parents=True, exist_ok=True)
        info = _rank_info()
        if model is not None:
            _atomic_save(_local(model.local_state_dict()), folder / f"model_{info}.pt")
        if optimizer is not None:
            _atomic_save(_local(optimizer.local_state_dict()), folder / f"optimizer_{info}.pt")
        if host_first:
            _atomic_save(user_content, folder / "user_content.pt")
    else:
        full = _full_model_state(model) if model is not None else None
        if optimizer is not None:
            warn_once("ckpt-full-opt", "save_checkpoint(partial=False) writes the full model only (as SMP does); "
                      "the optimizer state is kept in partial checkpoints")
        if host_first:
            if full is not None:
                _atomic_save(full, root / tag)
            _atomic_save(user_content, root / f"user_content_{tag}")
    dist.barrier()
    if host_first:
        _atomic_write_text(root / NEWEST, f"{tag}{'_partial' if partial else ''}\n")
        if partial and num_kept_partial_checkpoints is not None:
            _prune(root, num_kept_partial_checkpoints, keep=f"{tag}_partial")
    dist.barrier()


def _atomic_save(obj: Any, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, target)


def _atomic_write_text(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def _prune(root: Path, keep_count: int, keep: str) -> None:
    folders = sorted((p for p in root.glob("*_partial") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    excess = len(folders) - max(keep_count, 1)
    for folder in folders:
        if excess <= 0:
            break
        if folder.name != keep:
            shutil.rmtree(folder, ignore_errors=True)  # another host's first rank may prune a shared folder too
            excess -= 1


def resume_from_checkpoint(path: str | os.PathLike, tag: str | None = None, partial: bool = True, strict: bool = True,
                           load_optimizer: bool = True, load_sharded_optimizer_state: bool = True,
                           translate_function: Callable | None = None) -> Any:
    """Load the checkpoint into smp's DistributedModel / DistributedOptimizer (now if the model is partitioned,
    else right after partitioning, as SMP does) and return its user_content."""
    root = Path(path)
    if tag is None:
        newest = root / NEWEST
        if not newest.is_file():
            raise FileNotFoundError(f"smp.resume_from_checkpoint: no tag given and {newest} does not exist; pass "
                                    "tag= or point path at a folder written by smp.save_checkpoint")
        tag = newest.read_text().strip()
    if partial:
        folder = root / (tag if tag.endswith("_partial") else f"{tag}_partial")
        info = _rank_info()
        model_file, opt_file = folder / f"model_{info}.pt", folder / f"optimizer_{info}.pt"
        if not model_file.is_file():
            raise FileNotFoundError(f"smp.resume_from_checkpoint: {model_file} is missing (was it saved with the same "
                                    "pipeline/tensor parallel degrees?)")
        model_sd = torch.load(model_file, map_location="cpu", weights_only=False)
        opt_sd = torch.load(opt_file, map_location="cpu", weights_only=False) if (
            load_optimizer and opt_file.is_file()) else None
        user_content = torch.load(folder / "user_content.pt", map_location="cpu", weights_only=False)
    else:
        name = tag[:-len("_partial")] if tag.endswith("_partial") else tag
        model_sd = torch.load(root / name, map_location="cpu", weights_only=False)
        if translate_function is not None:
            model_sd = translate_function(model_sd)
        opt_sd = None
        user_content_file = root / f"user_content_{name}"
        user_content = torch.load(user_content_file, map_location="cpu", weights_only=False) if (
            user_content_file.is_file()) else None
    state.pending_resume = (model_sd, opt_sd, strict)
    model = state.model
    if model is not None and model.partitioned:
        apply_pending_resume()
    return user_content


def apply_pending_resume() -> None:
    model_sd, opt_sd, strict = state.pending_resume
    state.pending_resume = None
    if state.model is not None:
        state.model.load_state_dict(model_sd, strict=strict)
    if opt_sd is not None and state.optimizer is not None:
        state.optimizer.load_state_dict(opt_sd)
