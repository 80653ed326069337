"""SMP v1 activation checkpointing on torch.utils.checkpoint (non-reentrant: composes with DTensor/TP).

``set_activation_checkpointing(module)`` makes the module recompute its activations in backward; for an
nn.Sequential, ``strategy`` groups consecutive layers ("each", "group_<n>", "contiguous" = the whole sequential:
its stage's part of it, once partitioned, since each stage runs its own layers).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as _torch_checkpoint


def _group_size(strategy: str, n: int) -> int:
    if strategy == "each":
        return 1
    if strategy == "contiguous":
        return max(n, 1)
    if strategy.startswith("group_") and strategy[len("group_"):].isdigit() and int(strategy[len("group_"):]) > 0:
        return int(strategy[len("group_"):])
    raise ValueError(f"smp activation checkpointing: strategy={strategy!r}; use 'each', 'contiguous' or 'group_<n>' "
                     "(e.g. 'group_2')")


def checkpoint(module: nn.Module, *args: Any, preserve_rng_state: bool = True) -> Any:
    """Run ``module(*args)`` without keeping its activations; they are recomputed in backward."""
    if not isinstance(module, nn.Module):
        raise TypeError("smp checkpoint: pass an nn.Module (SMP checkpoints modules, not functions)")
    return _torch_checkpoint(module, *args, use_reentrant=False, preserve_rng_state=preserve_rng_state)


def _run_layers(layers: list[nn.Module], pack_args_as_tuple: bool, *inputs: Any) -> Any:
    x: Any = inputs if pack_args_as_tuple else inputs[0]
    for layer in layers:
        x = layer(x)
    return x


def checkpoint_sequential(sequential_module: nn.Sequential, input: Any, strategy: str = "each",
                          preserve_rng_state: bool = True, pack_args_as_tuple: bool = False) -> Any:
    layers = list(sequential_module)
    size = _group_size(strategy, len(layers))
    x = input
    for start in range(0, len(layers), size):
        chunk = layers[start:start + size]
        args = tuple(x) if (pack_args_as_tuple and isinstance(x, tuple)) else (x,)
        x = _torch_checkpoint(functools.partial(_run_layers, chunk, pack_args_as_tuple and isinstance(x, tuple)),
                              *args, use_reentrant=False, preserve_rng_state=preserve_rng_state)
    return x


def set_activation_checkpointing(module: nn.Module, preserve_rng_state: bool = True, pack_args_as_tuple: bool = False,
                                 strategy: str = "each") -> None:
    """Checkpoint ``module`` (call before or after DistributedModel; applies to this instance only)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"smp.set_activation_checkpointing: expected an nn.Module, got {type(module).__name__}")
    if not isinstance(module, nn.Sequential) and (pack_args_as_tuple or strategy != "each"):
        raise ValueError("smp.set_activation_checkpointing: pack_args_as_tuple and strategy apply only to "
                         "nn.Sequential modules")
    if getattr(module, "_smp_checkpointed", False):
        return
    if isinstance(module, nn.Sequential):
        _group_size(strategy, len(module))  # check now, not at the first forward
        original = module.forward

        def forward_sequential(input: Any) -> Any:
            if not torch.is_grad_enabled():
                return original(input)
            return checkpoint_sequential(module, input, strategy, preserve_rng_state, pack_args_as_tuple)

        forward: Callable[..., Any] = forward_sequential
    else:
        original = module.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            if not torch.is_grad_enabled():
                return original(*args, **kwargs)
            return _torch_checkpoint(original, *args, use_reentrant=False, preserve_rng_state=preserve_rng_state,
                                     **kwargs)
    module.forward = forward
    cast(Any, module)._smp_checkpointed = True  # Module.__setattr__ is typed for tensors and modules only
