"""Activation checkpointing of transformer blocks (non-reentrant, so it composes with FSDP2 and DTensor)."""
from __future__ import annotations

from collections.abc import Callable

from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

from .tp_plan import find_blocks


def block_names(model: nn.Module) -> list[str]:
    """Transformer blocks if the model has any, else the children of the first ModuleList/Sequential."""
    blocks = find_blocks(model)
    if blocks:
        return blocks
    for name, mod in model.named_modules():
        if isinstance(mod, (nn.ModuleList, nn.Sequential)) and len(mod) > 1:
            prefix = f"{name}." if name else ""
            return [f"{prefix}{i}" for i in range(len(mod))]
    return []


def _replace(model: nn.Module, path: str, new: nn.Module) -> None:
    parent_path, _, leaf = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    setattr(parent, leaf, new)


def apply_activation_checkpointing(model: nn.Module, blocks: list[str] | None = None,
                                   every: int = 1, check_fn: Callable[[str], bool] | None = None) -> list[str]:
    """Wrap every ``every``-th block in a checkpoint wrapper; returns the wrapped block names.

    Call after ``tsm.transform`` and before ``fully_shard`` (as with torchtitan): the wrapper then sits
    inside FSDP's unit and recomputation re-uses FSDP's all-gathered parameters.
    """
    names = block_names(model) if blocks is None else blocks
    wrapped = []
    for i, path in enumerate(names):
        if i % every or (check_fn is not None and not check_fn(path)):
            continue
        wrapper = checkpoint_wrapper(model.get_submodule(path), checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        _replace(model, path, wrapper)
        wrapped.append(path)
    return wrapped
