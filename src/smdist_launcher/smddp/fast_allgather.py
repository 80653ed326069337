"""AllGather pulled by the copy engines: no SM moves data.

Each rank stages its input into its symmetric buffer (a memcpy), passes one barrier, then
pulls every peer's chunk with memcpys spread over several side streams, so the copies of
different peers (and pieces of one peer) run on different copy engines at once; its own chunk
is copied on another stream meanwhile. The choreography is issued by the native helper
(native/smddp/ce_pull.cpp, a few microseconds of CPU) or, without it, from Python with
``Tensor.copy_`` (same-dtype contiguous copies are plain cudaMemcpyAsync calls).
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

from . import native
from .symm_buffers import GrowingPair, SymmBufferPair


def stage_copy(dst: torch.Tensor, src: torch.Tensor, kernel: bool) -> None:
    """Copy bytes ``src`` -> ``dst`` (uint8, same size): a memcpy, or with ``kernel`` an SM
    copy (bitwise OR with 0 over 8/4-byte words, bit-exact) that avoids the memcpy's
    per-call cost on symmetric (VMM-mapped) memory measured on the device."""
    if kernel:
        for dtype, width in ((torch.int64, 8), (torch.int32, 4)):
            if dst.numel() % width == 0 and dst.data_ptr() % width == 0 and src.data_ptr() % width == 0:
                torch.bitwise_or(src.view(dtype), 0, out=dst.view(dtype))
                return
    dst.copy_(src)


class CopyEngineAllGather:
    """all_gather_into_tensor for one process group on one NVLink island."""

    def __init__(
        self, group_name: str, device: torch.device, rank: int, world_size: int, splits: int = 1,
        serial: bool = False, kernel_stage: bool = False,
    ) -> None:
        self.rank, self.world_size = rank, world_size
        self.splits = max(1, splits)
        self.serial = serial  # all pulls one after another on one side stream
        self.kernel_stage = kernel_stage  # stage with an SM copy instead of a memcpy
        self.device = device
        self.buffers = GrowingPair(group_name, device, world_size)
        self.n_pull = (world_size - 1) * self.splits
        self.streams = [torch.cuda.Stream(device=device) for _ in range(self.n_pull + 1)]
        self.lib = native.load()
        self._native: dict[str, Any] = {}
        if self.lib is not None:
            self._set_up_native(self.lib)

    def _set_up_native(self, lib: ctypes.CDLL) -> None:
        ctx = ctypes.c_void_p()
        events = (ctypes.c_void_p * (self.n_pull + 2))()
        if lib.smddp_ce_current_context(ctypes.byref(ctx)) or lib.smddp_ce_make_events(len(events), events):
            self.lib = None  # fall back to the Python choreography
            return
        streams = (ctypes.c_void_p * self.n_pull)(*[s.cuda_stream for s in self.streams[:-1]])
        self._native = {"ctx": ctx, "events": events, "streams": streams, "local": self.streams[-1].cuda_stream}

    @staticmethod
    def eligible(output: torch.Tensor, input: torch.Tensor, world_size: int) -> bool:
        return (
            output.is_contiguous()
            and input.is_contiguous()
            and output.dtype == input.dtype
            and output.device == input.device
            and output.numel() == input.numel() * world_size
        )

    def __call__(self, output: torch.Tensor, input: torch.Tensor) -> None:
        nbytes = input.numel() * input.element_size()
        if nbytes == 0:
            return
        pair = self.buffers.get(nbytes)
        turn, buf, handle, peers = pair.next()
        main = torch.cuda.current_stream(self.device)
        if self.lib is not None and not self.kernel_stage:
            self._native_call(self.lib, pair, turn, buf, handle, main, output, input, nbytes)
        else:
            self._python_call(buf, handle, peers, main, output, input, nbytes)

    def _native_call(
        self, lib: ctypes.CDLL, pair: SymmBufferPair, turn: int, buf: torch.Tensor, handle: Any,
        main: Any, output: torch.Tensor, input: torch.Tensor, nbytes: int,
    ) -> None:
        n = self._native
        # Peer addresses as a C array, cached on the pair itself (a re-made pair brings new ones).
        if pair.native_peer_ptrs is None:
            pair.native_peer_ptrs = [
                (ctypes.c_uint64 * self.world_size)(*[p.data_ptr() for p in views]) for views in pair.peers
            ]
        ptrs = pair.native_peer_ptrs[turn]
        ms = main.cuda_stream
        rc = lib.smddp_ce_stage(n["ctx"], ms, n["local"], n["events"], output.data_ptr(), input.data_ptr(),
                                     buf.data_ptr(), nbytes, self.rank)
        if rc:
            raise RuntimeError(f"smddp copy-engine all_gather: staging failed with CUDA driver error {rc}")
        handle.barrier(channel=0)
        rc = lib.smddp_ce_pull(n["ctx"], ms, n["streams"], n["events"], output.data_ptr(), ptrs, nbytes,
                                    self.rank, self.world_size, self.splits, int(self.serial))
        if rc:
            raise RuntimeError(f"smddp copy-engine all_gather: pulls failed with CUDA driver error {rc}")

    def _python_call(
        self, buf: torch.Tensor, handle: Any, peers: list[torch.Tensor], main: Any,
        output: torch.Tensor, input: torch.Tensor, nbytes: int,
    ) -> None:
        src = input.reshape(-1).view(torch.uint8)
        out = output.reshape(-1).view(torch.uint8)
        local = self.streams[-1]
        local.wait_stream(main)
        with torch.cuda.stream(local):  # own chunk: a local copy that needs no peer
            out[self.rank * nbytes : (self.rank + 1) * nbytes].copy_(src)
        stage_copy(buf[:nbytes], src, self.kernel_stage)
        handle.barrier(channel=0)
        ready = torch.cuda.Event()
        ready.record(main)
        piece = -(-nbytes // self.splits)
        s = 0
        for step in range(1, self.world_size):
            peer = (self.rank + step) % self.world_size  # staggered so no peer serves everyone at once
            base = peer * nbytes
            for start in range(0, nbytes, piece):
                stop = min(nbytes, start + piece)
                stream = self.streams[0 if self.serial else s]
                if not self.serial or s == 0:
                    stream.wait_event(ready)
                s = 1 if self.serial else s + 1
                with torch.cuda.stream(stream):
                    out[base + start : base + stop].copy_(peers[peer][start:stop])
        for stream in self.streams[:s]:
            main.wait_stream(stream)
        main.wait_stream(local)
