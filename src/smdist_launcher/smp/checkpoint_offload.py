"""SMP's activation offloading: the activations that checkpointed layers keep for backward go to pinned host
memory during forward and come back ``horizon`` layers ahead of their use in backward.

It runs inside PyTorch's ``offload_wrapper`` (see ``offload_wrapper_patch``) in place of ``save_on_cpu``, whose
copies are synchronous both ways. Here:
- saved tensors are grouped by layer: a new group starts at the entry and at the exit of every activation-
  checkpointed module, so a group holds what one checkpointed layer saved (its inputs) or what ran between two;
- a group is copied out on a side stream when the next checkpointed layer starts or something new is saved
  (its tensors are complete then), into pinned memory; ``record_stream`` keeps the device memory from being
  reused before the copy is done;
- what was saved last is never copied out: backward needs it first;
- in backward, reaching a group queues the loads of the next ``horizon`` offloaded groups on a second side
  stream (copy engines run both directions at once); compute waits on an event only for the group it needs.
Parameters (and views of them, as FSDP's unsharded ones) and tensors under ``min_bytes`` stay where they are.
Without CUDA tensors the bookkeeping runs, nothing is copied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(eq=False)
class _Saved:
    group: _Group
    device_tensor: torch.Tensor | None  # until the copy-out is queued; kept for the last group
    host: torch.Tensor | None = None
    loaded: torch.Tensor | None = None


@dataclass(eq=False)
class _Group:
    index: int
    saved: list[_Saved] = field(default_factory=list)
    keys: dict[tuple, _Saved] = field(default_factory=dict)
    offloaded: Any = None  # CUDA event: copy-out done
    ready: Any = None  # CUDA event: copy-in done
    state: str = "open"  # open -> offloaded -> loading ; or open -> resident


def _is_param(t: torch.Tensor) -> bool:
    return isinstance(t, nn.Parameter) or isinstance(getattr(t, "_base", None), nn.Parameter)


class _Pass:
    """One forward (with grad) of the wrapped module and the backward that consumes it."""

    def __init__(self, offloader: CheckpointOffloader) -> None:
        self.o = offloader
        self.groups: list[_Group] = [_Group(0)]
        self.closed: list[_Group] = []  # complete groups whose copy-out waits for the next layer's start
        self.nonempty: list[_Group] = []

    # --- forward ------------------------------------------------------------------------------------
    def close(self) -> None:
        """End of a checkpointed layer: its group is complete."""
        cur = self.groups[-1]
        if cur.saved:
            self.closed.append(cur)
            self.groups.append(_Group(len(self.groups)))

    def enter(self) -> None:
        """Start of a checkpointed layer: what came before it is complete and goes out now."""
        self.close()
        self.flush()

    def flush(self) -> None:
        for group in self.closed:
            self._offload(group)
        self.closed = []

    def finish(self) -> None:
        # What was saved last (the closed but not yet flushed groups, the open one) stays: backward needs it first.
        for group in self.closed + [self.groups[-1]]:
            if group.saved:
                group.state = "resident"
                group.keys = {}
        self.closed = []
        self.nonempty = [g for g in self.groups if g.saved]
        for pos, g in enumerate(self.nonempty):
            g.index = pos

    def pack(self, t: torch.Tensor) -> Any:
        if t.numel() * t.element_size() < self.o.min_bytes or _is_param(t) or type(t) is not torch.Tensor:
            return t
        if self.closed:
            self.flush()
        group = self.groups[-1]
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key in group.keys:
            return group.keys[key]
        saved = _Saved(group, t)
        group.saved.append(saved)
        group.keys[key] = saved
        self.o.stats["saved_bytes"] += t.numel() * t.element_size()
        return saved

    def _offload(self, group: _Group) -> None:
        group.keys = {}
        group.state = "offloaded"
        stream = self.o.offload_stream
        if stream is None:
            return
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for s in group.saved:
                t = s.device_tensor
                assert t is not None
                if not t.is_cuda:
                    continue
                s.host = torch.empty_like(t, device="cpu", pin_memory=True)
                s.host.copy_(t, non_blocking=True)
                t.record_stream(stream)  # its memory is reused only after this copy
                s.device_tensor = None
                self.o.stats["offloaded_bytes"] += t.numel() * t.element_size()
            group.offloaded = torch.cuda.Event()
            group.offloaded.record(stream)

    # --- backward -----------------------------------------------------------------------------------
    def _load(self, group: _Group) -> None:
        if group.state != "offloaded":
            return
        group.state = "loading"
        stream = self.o.load_stream
        if stream is None or group.offloaded is None:
            return
        compute = torch.cuda.current_stream()
        stream.wait_stream(compute)  # the new device blocks come from the compute stream's pool
        stream.wait_event(group.offloaded)
        with torch.cuda.stream(stream):
            for s in group.saved:
                if s.host is None:
                    continue
                s.loaded = torch.empty_like(s.host, device=compute.device)
                s.loaded.copy_(s.host, non_blocking=True)
                s.host = None  # the pinned block returns to the host cache once this copy has run
            group.ready = torch.cuda.Event()
            group.ready.record(stream)
        group.saved = []  # from here on only autograd's saved variables hold the tensors

    def unpack(self, saved: Any) -> torch.Tensor:
        if not isinstance(saved, _Saved):
            return saved
        group = saved.group
        first = group.index
        for ahead in range(first, max(first - self.o.horizon - 1, -1), -1):
            if ahead < len(self.nonempty):
                self._load(self.nonempty[ahead])
        if saved.device_tensor is not None:
            if group.state == "resident":
                group.saved = []  # autograd holds it now; let it go when autograd does
            return saved.device_tensor
        if saved.loaded is None:
            raise RuntimeError("smp activation offloading: a saved activation was used before it was loaded")
        if group.ready is not None:
            torch.cuda.current_stream().wait_event(group.ready)
        return saved.loaded


class CheckpointOffloader:
    """Per wrapped module: finds its activation-checkpointed layers and offloads what they save."""

    def __init__(self, module: nn.Module, horizon: int = 2, min_bytes: int = 1 << 20) -> None:
        if horizon < 1:
            raise ValueError(f"activation_loading_horizon must be >= 1, got {horizon}")
        self.module = module
        self.horizon = horizon
        self.min_bytes = min_bytes
        cuda = torch.cuda.is_available()
        self.offload_stream = torch.cuda.Stream() if cuda else None
        self.load_stream = torch.cuda.Stream() if cuda else None
        self.stats = {"saved_bytes": 0, "offloaded_bytes": 0}
        self._pass: _Pass | None = None
        self.last_pass: _Pass | None = None  # the latest forward's bookkeeping (tests, diagnostics)
        self._hooked: set[int] = set()
        self.hook_layers()

    def hook_layers(self) -> int:
        """Put group boundaries around every checkpointed layer (again after new ones were wrapped)."""
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
        for m in self.module.modules():
            if isinstance(m, CheckpointWrapper) and id(m) not in self._hooked:
                m.register_forward_pre_hook(self._boundary)
                m.register_forward_hook(self._boundary_after, always_call=True)
                self._hooked.add(id(m))
        return len(self._hooked)

    def _boundary(self, *_: Any) -> None:
        if self._pass is not None:
            self._pass.enter()

    def _boundary_after(self, *_: Any) -> None:
        if self._pass is not None:
            self._pass.close()

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return fn(*args, **kwargs)
        outer = self._pass
        p = self._pass = self.last_pass = _Pass(self)
        try:
            with torch.autograd.graph.saved_tensors_hooks(p.pack, p.unpack):
                return fn(*args, **kwargs)
        finally:
            p.finish()
            self._pass = outer
