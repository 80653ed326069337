"""AllGather pulled by the copy engines: no SM moves data.

Each rank stages its input into its symmetric buffer (a memcpy), passes one barrier, then
pulls every peer's chunk with memcpys spread over several side streams, so the copies of
different peers (and pieces of one peer) run on different copy engines at once; its own chunk
is copied on another stream meanwhile. The choreography is issued by the native helper
(native/smddp/ce_pull.cpp, a few microseconds of CPU) or, without it, from Python with
``Tensor.copy_`` (same-dtype contiguous copies are plain cudaMemcpyAsync calls).

With the native helper a large call is pipelined in parts (``chunks``, ``SMDDP_CE_CHUNKS``): part k+1
is staged (a local HBM copy) while part k is pulled over NVLink, one barrier per part, so only the
first part's staging stays on the critical path instead of the whole input's.

Under the native c10d backend (``native_issuer``) the whole call is issued by C++ (smddp_backend.cpp:
stage, barrier, pulls and joins in one call, no Python per call); this object then only owns what
the calls use (buffers, side streams, the parts of each size) and hands it over in
:meth:`native_state` / :meth:`plan`.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

import torch

from . import native
from .symm_buffers import GrowingPair, SymmBufferPair

MIN_PART = 16 << 20  # bytes per rank below which a part is not split further (a barrier costs ~10 us)
PART_ALIGN = 1 << 16  # part boundaries on 64 KiB: whole copy-engine bursts, any dtype's elements


def pipeline_parts(nbytes: int, chunks: int, min_part: int = MIN_PART) -> list[tuple[int, int]]:
    """(start, length) of the parts one rank's ``nbytes`` are staged and pulled in: at most
    ``chunks`` parts of at least ``min_part`` bytes each (one part below), boundaries on PART_ALIGN,
    covering [0, nbytes) exactly once in order. Every rank computes the same parts (same nbytes)."""
    if nbytes <= 0:
        return []
    n = max(1, min(chunks, nbytes // max(min_part, 1)))
    step = -(-nbytes // n)
    step = -(-step // PART_ALIGN) * PART_ALIGN
    return [(start, min(step, nbytes - start)) for start in range(0, nbytes, step)]


def default_chunks(world_size: int) -> int:
    """``SMDDP_CE_CHUNKS`` (a whole number >= 1), else DEFAULT_CHUNKS for the group size (1: no pipelining)."""
    raw = os.environ.get("SMDDP_CE_CHUNKS", "").strip()
    if not raw:
        return DEFAULT_CHUNKS.get(world_size, 1)
    return _whole_number("SMDDP_CE_CHUNKS", raw, "parts >= 1 (1 = no pipelining), e.g. 4")


def _whole_number(key: str, raw: str, what: str, most: int | None = None) -> int:
    # Plain ASCII digits only: int() also takes "1_0", "+4" and other scripts' digits.
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else 0
    if value < 1 or (most is not None and value > most):
        bound = f" (at most {most})" if most is not None else ""
        raise ValueError(f"{key}={raw!r}: expected a whole number of {what}{bound}")
    return value


MAX_SPLITS = 16  # pieces per peer: each is a side stream and a copy per call (SMDDP_CE_SPLITS)


# Group size -> parts (of at least MIN_PART per rank). 2x H100, 2026-11-27 (docs/benchmarks.md,
# benchmarks/collectives.py --ag-pipeline): against the unpipelined call +3-5% busbw at 64 MiB-1 GiB
# (e.g. 256 MiB 238 -> 249 GB/s, NCCL 242); 4 parts of 16 MiB no worse than 2 anywhere. 4+ GPUs
# (serial pulls) not measured: no pipelining there.
DEFAULT_CHUNKS = {2: 4}


@dataclass(frozen=True)
class CeOptions:
    """How the copy-engine AllGather of a group of ``world_size`` issues its copies (SMDDP_CE_* settings)."""

    serial: bool  # all pulls one after another on one side stream
    splits: int  # pieces per peer
    kernel_stage: bool  # stage with an SM copy instead of a memcpy (Python choreography)
    chunks: int  # pipelined parts (native helper)


def ce_options(world_size: int) -> CeOptions:
    """The one reading of the SMDDP_CE_* settings (both process-group flavours use it); a bad value
    raises ValueError naming the variable, the value and what is allowed."""
    raw_splits = os.environ.get("SMDDP_CE_SPLITS", "").strip()
    return CeOptions(
        # Measured on 4x H200: pulling the 3 peers one after another (on one side stream) runs at
        # NCCL's speed; pulling them concurrently ran ~1.6x slower (contention).
        serial=_flag("SMDDP_CE_SERIAL", world_size > 2),
        # One copy per peer: a single copy-engine copy already fills a GPU's NVLink ingress.
        splits=_whole_number("SMDDP_CE_SPLITS", raw_splits, "pieces per peer >= 1, e.g. 1", MAX_SPLITS)
        if raw_splits else 1,
        kernel_stage=_flag("SMDDP_CE_KERNEL_STAGE", False),
        chunks=default_chunks(world_size),
    )


def _flag(key: str, default: bool) -> bool:
    raw = os.environ.get(key, "").strip()
    if not raw:
        return default
    if raw not in ("0", "1"):
        raise ValueError(f"{key}={raw!r}: expected 0 or 1")
    return raw == "1"


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


class PartPlans:
    """The parts a call of each size is staged and pulled in (:func:`pipeline_parts`), cached per size: a
    repeated call plans nothing. ``version`` (a CPU int64 tensor, bumped in place whenever ``chunks`` or
    ``min_part`` change) lets the native backend, which caches the parts too, see a change without the GIL.
    Not ``pipelined`` (the Python choreography): one part whatever ``chunks`` says."""

    MAX_SIZES = 256  # a training loop repeats a few sizes; a sweep may see many: bounded

    def __init__(self, chunks: int, min_part: int = MIN_PART, pipelined: bool = True) -> None:
        self._chunks, self._min_part, self.pipelined = chunks, min_part, pipelined
        self._cache: dict[int, tuple[tuple[int, int], ...]] = {}
        self.version = torch.zeros(1, dtype=torch.int64)

    @property
    def chunks(self) -> int:
        return self._chunks

    @chunks.setter
    def chunks(self, value: int) -> None:
        self._chunks = value
        self._changed()

    @property
    def min_part(self) -> int:
        return self._min_part

    @min_part.setter
    def min_part(self, value: int) -> None:
        self._min_part = value
        self._changed()

    def _changed(self) -> None:
        self._cache.clear()
        self.version += 1  # in place: the native backend holds this tensor

    def parts(self, nbytes: int) -> tuple[tuple[int, int], ...]:
        """(start, length) of each part of a call of ``nbytes`` per rank."""
        parts = self._cache.get(nbytes)
        if parts is None:
            parts = tuple(pipeline_parts(nbytes, self._chunks if self.pipelined else 1, self._min_part))
            if len(self._cache) >= self.MAX_SIZES:
                self._cache.clear()
            self._cache[nbytes] = parts
        return parts

    def barrier_plan(self) -> str:
        """What sets the number of barriers per call (see CopyEngineAllGather.barrier_plan)."""
        return f"parts={self._chunks if self.pipelined else 1} min_part={self._min_part}"


class CopyEngineAllGather:
    """all_gather_into_tensor for one process group on one NVLink island."""

    def __init__(
        self, group_name: str, device: torch.device, rank: int, world_size: int, options: CeOptions | None = None,
        native_issuer: bool = False,
    ) -> None:
        options = options or ce_options(world_size)
        self.rank, self.world_size = rank, world_size
        self.splits = options.splits
        self.serial = options.serial  # all pulls one after another on one side stream
        self.kernel_stage = options.kernel_stage  # stage with an SM copy instead of a memcpy
        self.device = device
        # Calls of a group on different streams are chained (see __call__): the last call's stream and end.
        self._last_stream: int | None = None
        self._done = torch.cuda.Event()
        self.buffers = GrowingPair(group_name, device, world_size)
        self.n_pull = (world_size - 1) * self.splits
        self.streams = [torch.cuda.Stream(device=device) for _ in range(self.n_pull + 1)]
        # The C++ backend issues the calls itself (no ctypes helper needed), except with the SM staging copy.
        self.native_issuer = native_issuer and not self.kernel_stage
        self.lib = None if self.native_issuer else native.load()
        self._native: dict[str, Any] = {}
        if self.lib is not None:
            self._set_up_native(self.lib)
        # parts per size (pipelined only where native code issues the calls)
        self.plans = PartPlans(options.chunks, MIN_PART,
                               pipelined=(self.native_issuer or self.lib is not None) and not self.kernel_stage)

    @property
    def chunks(self) -> int:
        return self.plans.chunks

    @chunks.setter
    def chunks(self, value: int) -> None:
        self.plans.chunks = value

    @property
    def min_part(self) -> int:
        return self.plans.min_part

    @min_part.setter
    def min_part(self, value: int) -> None:
        self.plans.min_part = value

    @property
    def pipelined(self) -> bool:
        """Whether calls are staged and pulled in parts (the native helper or backend issues them)."""
        return self.plans.pipelined

    def plan(self, nbytes: int) -> tuple[tuple[int, int], ...]:
        return self.plans.parts(nbytes)

    def native_state(self, nbytes: int) -> tuple[Any, ...]:
        """What the C++ backend issues calls of up to ``nbytes`` per rank with (collective: every rank
        asks at the same call, the first and each one that grows the pair): (capacity, buffer addresses
        [2], rendezvous handles [2], every rank's buffer addresses [2][world], pull stream handles,
        own-chunk stream handle, splits, serial, plan_version). This object keeps all of it alive."""
        pair = self.buffers.get(nbytes)
        peers = [[p.data_ptr() for p in views] for views in pair.peers]
        return (pair.capacity, [b.data_ptr() for b in pair.buffers], list(pair.handles), peers,
                [s.cuda_stream for s in self.streams[:-1]], self.streams[-1].cuda_stream, self.splits,
                self.serial, self.plans.version)

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
        """Contiguous, same dtype and device, output = world_size x input. Only what every rank shares
        decides: a rank sending a call to NCCL while its peers pull would leave them waiting at the
        barrier (and the first call's set-up is collective). Where the input sits is rank-local, so
        an input overlapping the output is handled in the call (:meth:`private_input`), not here."""
        return (
            output.is_contiguous()
            and input.is_contiguous()
            and output.dtype == input.dtype
            and output.device == input.device
            and output.numel() == input.numel() * world_size
        )

    @staticmethod
    def private_input(output: torch.Tensor, input: torch.Tensor, rank: int) -> torch.Tensor:
        """``input``, or a copy of it when it overlaps the output other than as exactly this rank's
        chunk (FSDP2's in-place gather, which needs no copy): pulls into the chunk it overlaps would
        overwrite it before it is staged (NCCL leaves that undefined; here the result is the gather)."""
        nbytes, out_bytes = input.numel() * input.element_size(), output.numel() * output.element_size()
        out_start, in_start = output.data_ptr(), input.data_ptr()
        apart = nbytes == 0 or in_start + nbytes <= out_start or out_start + out_bytes <= in_start
        return input if apart or in_start == out_start + rank * nbytes else input.clone()

    @staticmethod
    def capturing() -> bool:
        """Inside CUDA-graph capture the copy engines are not used (callers send the call to NCCL): a
        replay would restage the one buffer captured while a peer may still pull the previous replay's
        data from it, and a first call's buffer set-up cannot be captured. Every rank captures the
        same calls, so every rank gives those to NCCL alike."""
        return torch.cuda.is_current_stream_capturing()

    def barrier_plan(self) -> str:
        """What sets the number of barriers per call: every rank of the group must have the same, or
        a rank's pull would meet a peer's barrier of another part (or call): wrong data or a hang."""
        return self.plans.barrier_plan()

    def __call__(self, output: torch.Tensor, input: torch.Tensor) -> None:
        nbytes = input.numel() * input.element_size()
        if nbytes == 0:
            return
        input = self.private_input(output, input, self.rank)
        pair = self.buffers.get(nbytes)
        turn, buf, handle, peers = pair.next()
        main = torch.cuda.current_stream(self.device)
        # A call staging into buffer k%2 is safe once the previous call's barrier passed on the same
        # stream (symm_buffers.py); a call on another stream first waits for the previous call's end,
        # so the calls of a group stay one chain whatever streams issue them (as NCCL's one stream).
        if self._last_stream is not None and self._last_stream != main.cuda_stream:
            main.wait_event(self._done)
        if self.lib is not None and not self.kernel_stage:
            self._native_call(self.lib, pair, turn, buf, handle, main, output, input, nbytes)
        else:
            self._python_call(buf, handle, peers, main, output, input, nbytes)
        self._done.record(main)
        self._last_stream = main.cuda_stream

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
        out_ptr, in_ptr, buf_ptr = output.data_ptr(), input.data_ptr(), buf.data_ptr()
        for i, (start, length) in enumerate(self.plan(nbytes)):
            rc = lib.smddp_ce_stage_part(n["ctx"], ms, n["local"], n["events"], out_ptr, in_ptr, buf_ptr, nbytes,
                                         start, length, self.rank, int(i == 0))
            if rc:
                raise RuntimeError(f"smddp copy-engine all_gather: staging failed with CUDA driver error {rc}")
            handle.barrier(channel=0)  # every peer staged this part
            rc = lib.smddp_ce_pull_part(n["ctx"], ms, n["streams"], n["events"], out_ptr, ptrs, nbytes, start,
                                        length, self.rank, self.world_size, self.splits, int(self.serial))
            if rc:
                raise RuntimeError(f"smddp copy-engine all_gather: pulls failed with CUDA driver error {rc}")
        rc = lib.smddp_ce_join(n["ctx"], ms, n["streams"], 1 if self.serial else self.n_pull, n["events"])
        if rc:
            raise RuntimeError(f"smddp copy-engine all_gather: join failed with CUDA driver error {rc}")

    def _python_call(
        self, buf: torch.Tensor, handle: Any, peers: list[torch.Tensor], main: Any,
        output: torch.Tensor, input: torch.Tensor, nbytes: int,
    ) -> None:
        src = input.reshape(-1).view(torch.uint8)
        out = output.reshape(-1).view(torch.uint8)
        local = self.streams[-1]
        local.wait_stream(main)
        own = out[self.rank * nbytes : (self.rank + 1) * nbytes]
        if own.data_ptr() != src.data_ptr():  # in place (FSDP2): the own chunk is already there
            with torch.cuda.stream(local):  # own chunk: a local copy that needs no peer
                own.copy_(src)
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
