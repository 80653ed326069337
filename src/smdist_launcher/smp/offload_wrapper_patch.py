"""SMP's activation offloading behind PyTorch's ``offload_wrapper``.

SMP v2 scripts enable it with ``sm_activation_offloading: true`` (and ``activation_loading_horizon``) and wrap
their activation-checkpointed model with ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper.
offload_wrapper``. After ``tsm.init``, that wrapper's forward runs :class:`CheckpointOffloader` (prefetching,
side streams) instead of ``save_on_cpu``; with ``sm_activation_offloading: false``, or before ``tsm.init``, it is
PyTorch's own. The results are the same either way: only where the saved activations wait changes.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import OffloadWrapper

from .checkpoint_offload import CheckpointOffloader

_original_forward: Callable[..., Any] | None = None
_warned: set[str] = set()
# Smaller saved tensors are not worth a copy each way (a layer input of a real model is megabytes).
MIN_BYTES = 1 << 20


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=3)


def _active() -> bool:
    from .state import state
    return state.initialized and state.cfg.sm_activation_offloading


def offloader_of(wrapper: OffloadWrapper) -> CheckpointOffloader:
    from .state import state
    off = wrapper.__dict__.get("_smp_offloader")
    if off is None:
        off = CheckpointOffloader(wrapper._checkpoint_wrapped_module, horizon=state.cfg.activation_loading_horizon,
                                  min_bytes=MIN_BYTES)
        wrapper.__dict__["_smp_offloader"] = off  # not a submodule: keeps state_dict and module tree unchanged
    return off


def install() -> None:
    """Idempotent."""
    global _original_forward
    if _original_forward is not None:
        return
    original = OffloadWrapper.forward
    _original_forward = original

    @functools.wraps(original)
    def forward(self: OffloadWrapper, *args: Any, **kwargs: Any) -> Any:
        if not _active():
            return original(self, *args, **kwargs)
        off = offloader_of(self)
        if off.hook_layers() == 0:
            _warn_once("no-ac", "smp: sm_activation_offloading offloads the activations of activation-checkpointed "
                                "layers, and this offload_wrapper holds none; apply activation checkpointing "
                                "(checkpoint_wrapper) to the model's layers before offload_wrapper")
        if not torch.cuda.is_available():
            _warn_once("cpu", "smp: sm_activation_offloading has no GPU to offload from on this host; the "
                              "checkpointed activations stay in host memory where they already are")
        return off.run(self._checkpoint_wrapped_module, *args, **kwargs)

    OffloadWrapper.forward = forward  # type: ignore[method-assign]


def uninstall() -> None:
    global _original_forward
    if _original_forward is not None:
        OffloadWrapper.forward = _original_forward  # type: ignore[method-assign]
        _original_forward = None
