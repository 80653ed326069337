"""Activation offloading to CPU with a loading horizon, overlapped on a side CUDA stream.

Forward: tensors that a block saves for backward are copied to pinned host memory on a side stream while
compute continues; the device copy is released as soon as that copy is done (``record_stream``).
Backward walks the blocks in reverse; when block ``b`` needs its tensors, blocks ``b-1 .. b-horizon+1``
are already being loaded back on the side stream, so at most ``horizon`` offloaded blocks are resident
(SMP's ``activation_loading_horizon``). The last ``horizon`` blocks are never offloaded: backward needs
them first. Parameters (also FSDP2's all-gathered ones) and small tensors stay where they are.

On CPU the same bookkeeping runs with plain copies, so the logic is testable without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle


@dataclass(eq=False)
class _Offloaded:
    block: int
    host: torch.Tensor | None
    device: torch.device
    loaded: torch.Tensor | None = None
    ready: Any = None  # torch.cuda.Event once the host->device copy is queued
    offloaded: Any = None  # torch.cuda.Event: the device->host copy is done


@dataclass(eq=False)
class _Kept:
    """A tensor left on the device; it still tells backward which block it has reached."""

    block: int
    tensor: torch.Tensor


@dataclass
class _BlockState:
    pending: list[_Offloaded] = field(default_factory=list)
    param_ptrs: set[int] | None = None
    # key -> (handle, tensor): the tensor is held until the block's forward ends so that its address
    # cannot be reused by another tensor while the key may still match
    dedupe: dict[tuple, tuple[_Offloaded, torch.Tensor]] = field(default_factory=dict)
    loading: bool = False


def _storage_ptr(t: torch.Tensor) -> int:
    local = t._local_tensor if hasattr(t, "_local_tensor") else t
    return local.untyped_storage().data_ptr()


class ActivationOffloader:
    """Installs saved-tensor hooks around ``root``'s forward and tracks which block is running."""

    def __init__(self, root: nn.Module, blocks: list[nn.Module], horizon: int = 2,
                 offload_fraction: float = 1.0, min_bytes: int = 1 << 20) -> None:
        if horizon < 1:
            raise ValueError(f"activation_loading_horizon must be >= 1, got {horizon}")
        if not 0.0 <= offload_fraction <= 1.0:
            raise ValueError(f"offload_fraction must be within [0, 1], got {offload_fraction}")
        self.blocks = blocks
        self.horizon = horizon
        self.min_bytes = min_bytes
        candidates = max(len(blocks) - horizon, 0)
        # Offload the earliest blocks: their tensors have the longest time to travel both ways.
        self.offloaded_blocks = set(range(round(candidates * offload_fraction)))
        self._current: int | None = None
        self._states: list[_BlockState] = [_BlockState() for _ in blocks]
        # Two side streams: PCIe is full duplex, so offloads and loads run at the same time.
        self._stream = torch.cuda.Stream() if torch.cuda.is_available() else None
        self._load_stream = torch.cuda.Stream() if torch.cuda.is_available() else None
        self._ctx: Any = None
        self.stats = {"offloaded_bytes": 0, "kept_bytes": 0}
        self._handles: list[RemovableHandle] = []
        self._handles.append(root.register_forward_pre_hook(self._enter_root))
        self._handles.append(root.register_forward_hook(self._exit_root, always_call=True))
        for i, block in enumerate(blocks):
            self._handles.append(block.register_forward_pre_hook(self._make_enter(i)))
            self._handles.append(block.register_forward_hook(self._exit_block, always_call=True))

    # --- hooks that track where we are -----------------------------------------------------
    def _enter_root(self, module: nn.Module, args: Any) -> None:
        if torch.is_grad_enabled():
            self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
            self._ctx.__enter__()

    def _exit_root(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None
        self._current = None

    def _make_enter(self, index: int):
        def enter(module: nn.Module, args: Any) -> None:
            self._current = index
            self._states[index] = _BlockState()
        return enter

    def _exit_block(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._current is not None:
            self._states[self._current].dedupe = {}
        self._current = None

    # --- pack / unpack -----------------------------------------------------------------------
    def _is_param(self, t: torch.Tensor, state: _BlockState) -> bool:
        if state.param_ptrs is None:
            block = self.blocks[self._current]  # type: ignore[index]
            state.param_ptrs = {_storage_ptr(p) for p in block.parameters()}
        return _storage_ptr(t) in state.param_ptrs

    def _pack(self, t: torch.Tensor) -> Any:
        index = self._current
        if index is None:
            return t
        nbytes = t.numel() * t.element_size()
        if (index not in self.offloaded_blocks or nbytes < self.min_bytes
                or isinstance(t, nn.Parameter) or type(t) is not torch.Tensor):
            return _Kept(index, t)
        state = self._states[index]
        if self._is_param(t, state):
            return _Kept(index, t)
        key = (_storage_ptr(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key in state.dedupe:
            return state.dedupe[key][0]
        # empty_like keeps dense strides and falls back to contiguous for expanded/overlapping views
        host = torch.empty_like(t, device="cpu", pin_memory=self._stream is not None)
        if self._stream is not None and t.is_cuda:
            self._stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._stream):
                host.copy_(t, non_blocking=True)
                offloaded = torch.cuda.Event()
                offloaded.record(self._stream)
            t.record_stream(self._stream)  # the device memory is reused only after the copy has finished
        else:
            host.copy_(t)
            offloaded = None
        handle = _Offloaded(block=index, host=host, device=t.device, offloaded=offloaded)
        state.pending.append(handle)
        state.dedupe[key] = (handle, t)
        self.stats["offloaded_bytes"] += nbytes
        return handle

    def _load_block(self, index: int) -> None:
        if index < 0 or index not in self.offloaded_blocks:
            return
        state = self._states[index]
        if state.loading:
            return
        state.loading = True
        for handle in state.pending:
            host = handle.host
            assert host is not None
            if self._load_stream is not None and handle.device.type == "cuda":
                # Allocate on the compute stream (its memory pool is the one backward frees into),
                # fill on the load stream once the offload of this tensor has finished.
                loaded = torch.empty_like(host, device=handle.device)
                self._load_stream.wait_stream(torch.cuda.current_stream())
                self._load_stream.wait_event(handle.offloaded)
                with torch.cuda.stream(self._load_stream):
                    loaded.copy_(host, non_blocking=True)
                    handle.ready = torch.cuda.Event()
                    handle.ready.record(self._load_stream)
                handle.loaded = loaded
            else:
                handle.loaded = host.clone()
            handle.host = None  # the caching host allocator keeps it alive until the copy is done
        # Only autograd's saved variables keep the handles now; they free the tensors after use.
        state.pending = []
        state.dedupe = {}

    def _unpack(self, packed: Any) -> torch.Tensor:
        if isinstance(packed, _Kept):
            # Backward has reached this block: start loading the offloaded blocks within the horizon,
            # so that they arrive while the blocks in between run their backward.
            for ahead in range(self.horizon):
                self._load_block(packed.block - ahead)
            return packed.tensor
        if not isinstance(packed, _Offloaded):
            return packed
        for ahead in range(self.horizon):
            self._load_block(packed.block - ahead)
        tensor = packed.loaded
        assert tensor is not None
        if packed.ready is not None:
            torch.cuda.current_stream().wait_event(packed.ready)
            tensor.record_stream(torch.cuda.current_stream())
        return tensor

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def apply_activation_offloading(model: nn.Module, blocks: list[str] | None = None, horizon: int = 2,
                                offload_fraction: float = 1.0, min_bytes: int = 1 << 20) -> ActivationOffloader:
    """Offload the saved activations of ``model``'s blocks (default: its transformer blocks)."""
    from .activation_checkpoint import block_names
    names = block_names(model) if blocks is None else blocks
    if not names:
        raise ValueError("smp: activation offloading found no blocks; pass blocks=[...module names...]")
    return ActivationOffloader(model, [model.get_submodule(n) for n in names], horizon=horizon,
                               offload_fraction=offload_fraction, min_bytes=min_bytes)
