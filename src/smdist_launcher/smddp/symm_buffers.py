"""Symmetric-memory staging buffers shared by the fast paths.

Two buffers are used in turn. A collective that stages into buffer k%2 and then passes a
barrier proves every peer finished the collective before it (stream order), so the buffer
written next (k+1)%2 = (k-1)%2 is no longer being read: one barrier per call instead of two.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import torch

if TYPE_CHECKING:
    from torch.distributed.distributed_c10d import GroupName  # a NewType of str (torch >= 2.12)


def _symm_mem() -> Any:
    # smddp never uses multimem ops; without multicast objects setup is cheaper and cannot
    # touch the NVSwitch multicast state (see /work/.library KINDS.md for why that matters).
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    import torch.distributed._symmetric_memory as symm_mem

    return symm_mem


def register_group(group_name: str, store: Any, rank: int, size: int, timeout: Any = None) -> str:
    """Give symmetric memory a group it can resolve by name; returns that name.

    torch 2.11's rendezvous resolves the group name to a C++ ProcessGroup and reads its store;
    a Python ProcessGroup subclass has none (pybind refuses the store constructor for
    subclasses) and the rendezvous crashes. So the fast paths use a plain C++ ProcessGroup
    over the same store with a gloo backend of its own, registered as ``<name>/smddp-symm``,
    and the group info is also set directly (older torch reads only that).

    ``destroy_process_group()`` unregisters every group, this helper included, and a later
    ``init_process_group`` names its groups "0", "1"... again: a name registered before the
    teardown would resolve to nothing (or to the old store) in the next run. So each teardown
    seen starts a new generation of names (every rank tears down and re-inits alike, so they agree).
    """
    import torch.distributed as dist
    from torch._C._distributed_c10d import _register_process_group, _resolve_process_group

    symm_mem = _symm_mem()
    generation = _GENERATIONS.get(group_name, 0)
    name = cast("GroupName", _symm_name(group_name, generation))
    if name in _REGISTERED:
        try:
            _resolve_process_group(name)
            return name  # the same run: the group is already set up
        except RuntimeError:  # unregistered by destroy_process_group: a new run
            generation += 1
            _GENERATIONS[group_name] = generation
            name = cast("GroupName", _symm_name(group_name, generation))
    prefixed = dist.PrefixStore("smddp/symm/", store)
    helper = dist.ProcessGroup(prefixed, rank, size)
    gloo_args = (dist.PrefixStore("gloo/", prefixed), rank, size) + ((timeout,) if timeout is not None else ())
    gloo = dist.ProcessGroupGloo(*gloo_args)
    helper._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    helper._set_group_name(name)
    _register_process_group(name, helper)
    _REGISTERED[name] = helper
    try:
        from torch._C._distributed_c10d import _SymmetricMemory

        _SymmetricMemory.set_group_info(name, rank, size, prefixed)
    except (ImportError, AttributeError, RuntimeError):  # newer torch resolves the group instead
        pass
    symm_mem._group_name_to_store[name] = prefixed
    return name


def _symm_name(group_name: str, generation: int) -> str:
    return f"{group_name}/smddp-symm" + (f".{generation}" if generation else "")


_REGISTERED: dict[str, Any] = {}  # keeps the helper groups alive for the process's lifetime
_GENERATIONS: dict[str, int] = {}  # group name -> teardowns seen (register_group)


class SymmBufferPair:
    """Two rendezvoused byte buffers of ``capacity`` bytes plus cached peer views."""

    def __init__(self, group_name: str, device: torch.device, capacity: int, world_size: int) -> None:
        symm_mem = _symm_mem()
        self.capacity = capacity
        self.buffers = [symm_mem.empty(capacity, dtype=torch.uint8, device=device) for _ in range(2)]
        self.handles = [symm_mem.rendezvous(b, group_name) for b in self.buffers]
        self.peers = [
            [h.get_buffer(p, (capacity,), torch.uint8, 0) for p in range(world_size)] for h in self.handles
        ]
        self._turn = 0
        self.native_peer_ptrs: list[Any] | None = None  # C arrays of peer addresses (native helper)

    def next(self) -> tuple[int, torch.Tensor, Any, list[torch.Tensor]]:
        """(index, local buffer, handle, peer views) of the buffer whose turn it is."""
        i = self._turn
        self._turn ^= 1
        return i, self.buffers[i], self.handles[i], self.peers[i]


class GrowingPair:
    """A SymmBufferPair that is re-made larger when a call needs more (collective: every rank
    sees the same sizes in the same order, so every rank grows at the same call)."""

    def __init__(self, group_name: str, device: torch.device, world_size: int, minimum: int = 1 << 20) -> None:
        self.group_name, self.device, self.world_size, self.minimum = group_name, device, world_size, minimum
        self.pair: SymmBufferPair | None = None

    def get(self, nbytes: int) -> SymmBufferPair:
        if self.pair is None or self.pair.capacity < nbytes:
            capacity = max(self.minimum, 1 << (max(nbytes, 1) - 1).bit_length())
            if self.pair is not None:
                # Freeing unmaps this rank's buffers and its mappings of the peers' at once, not in
                # stream order: the previous calls' copies and kernels that use them (queued, the host
                # runs ahead) finish first. (A peer's mapping keeps this rank's memory alive for it.)
                torch.cuda.synchronize(self.device)
            self.pair = None  # free the old buffers before taking the new ones
            self.pair = SymmBufferPair(self.group_name, self.device, capacity, self.world_size)
        return self.pair


def lamport_buffer(group_name: str, device: torch.device, world_size: int, region_bytes: int) -> tuple[Any, ...]:
    """The Lamport kernel's buffer (native/smddp/lamport_allreduce.cu): 2 slots x world_size
    regions of region_bytes, every byte 0xFF (the "not arrived" sentinel). Returns (buffer,
    rendezvous handle, every rank's buffer address in this process). Collective."""
    symm_mem = _symm_mem()
    buffer = symm_mem.empty(2 * world_size * region_bytes, dtype=torch.uint8, device=device)
    buffer.fill_(255)
    handle = symm_mem.rendezvous(buffer, group_name)
    peers = [handle.get_buffer(p, (buffer.numel(),), torch.uint8, 0).data_ptr() for p in range(world_size)]
    return buffer, handle, peers
