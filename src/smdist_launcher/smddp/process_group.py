"""The "smddp" process group: one object per group that sends each call to the right path.

CPU tensors go to gloo (CI, local mode), CUDA tensors to :class:`CudaPath` (NVLink fast
paths + NCCL). Where CUDA is present the creator returns the native C++ backend instead
(native_backend.py) and this Python group is its fallback: see README.md.
Both the pre-2.12 method names (``_allgather_base``) and the new ones (``all_gather_single``)
are defined, because Python callers use whichever their torch version knows.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions  # torch.distributed does not re-export it

from .cpu_path import GlooPath

BACKEND_NAME = "smddp"

# torch's stub types ProcessGroup's Python call forms (overloads such as ``allreduce(tensor, op)`` and a required
# store); this subclass implements what the C++ trampoline calls, ``(tensors, opts)``, which no override of those
# overloads can match. Type checkers see an untyped base; the methods below carry the types.
_ProcessGroupBase: Any = dist.ProcessGroup


def _first_tensor(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


class SmddpProcessGroup(_ProcessGroupBase):
    """Collectives for CPU and CUDA tensors under one backend name."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)  # pybind allows no store for Python subclasses (see symm_buffers)
        self._store = store
        self._timeout = timeout
        self._cpu = GlooPath(store, rank, size, timeout)
        self._cuda: Any = None
        # The inner groups are also registered as this group's per-device backends. Then the
        # C++ side has a group name to report, and a collective dispatched from C++ that the
        # Python trampoline does not forward (``_allgather_base`` from functional collectives /
        # DTensor on torch 2.11) still reaches a real backend instead of raising.
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._cpu.pg)
        if torch.cuda.is_available() and hasattr(dist, "ProcessGroupNCCL"):
            self._register_backend(torch.device("cuda"), dist.ProcessGroup.BackendType.NCCL, self.cuda_path.nccl)

    # ---- identity ----
    def getBackendName(self) -> str:
        return BACKEND_NAME

    @property
    def cuda_path(self) -> Any:
        """The CUDA side (inner NCCL group, router, fast paths); built on first use."""
        if self._cuda is None:
            from .cuda_path import CudaPath

            self._cuda = CudaPath(self._store, self.rank(), self.size(), self._timeout, lambda: self.group_name)
        return self._cuda

    def _path(self, *tensor_args: Any) -> Any:
        t = _first_tensor(list(tensor_args))
        if t is not None and t.is_cuda:
            return self.cuda_path
        return self._cpu

    # ---- reductions ----
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(tensors).allreduce(tensors, opts or dist.AllreduceOptions())

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.AllreduceCoalescedOptions()
        path = self._path(tensors)
        if path is self._cpu:
            return path.allreduce_coalesced(tensors, opts)
        return path.nccl.allreduce_coalesced(tensors, opts)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(tensors).reduce(tensors, opts or dist.ReduceOptions())

    def reduce_scatter(
        self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any = None
    ) -> dist.Work:
        return self._path(outputs).reduce_scatter(outputs, inputs, opts or dist.ReduceScatterOptions())

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        return self._path(output).reduce_scatter_base(output, input, opts or dist.ReduceScatterOptions())

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return self._chain(works, outputs)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    # ---- gathers ----
    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        return self._path(output).allgather_base(output, input, opts or AllgatherOptions())

    all_gather_single = _allgather_base

    def allgather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(inputs).allgather(outputs, inputs, opts or AllgatherOptions())

    def allgather_coalesced(
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        opts = opts or AllgatherOptions()
        works = [self.allgather([out], [inp], opts) for out, inp in zip(outputs, inputs, strict=True)]
        return self._chain(works, [t for out in outputs for t in out])

    def allgather_into_tensor_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        return self._chain([self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)], outputs)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(inputs).gather(outputs, inputs, opts or dist.GatherOptions())

    # ---- one-to-all, all-to-all, point-to-point ----
    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(tensors).broadcast(tensors, opts or dist.BroadcastOptions())

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any = None) -> dist.Work:
        return self._path(outputs).scatter(outputs, inputs, opts or dist.ScatterOptions())

    def alltoall_base(
        self, output: torch.Tensor, input: torch.Tensor, output_splits: list[int], input_splits: list[int],
        opts: Any = None,
    ) -> dist.Work:
        opts = opts or dist.AllToAllOptions()
        return self._path(output).alltoall_base(output, input, output_splits, input_splits, opts)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self._path(outputs).alltoall(outputs, inputs, opts or dist.AllToAllOptions())

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        return self._path(tensors).send(tensors, dst, tag)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        return self._path(tensors).recv(tensors, src, tag)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> dist.Work:
        return self._path(tensors).recv_anysource(tensors, tag)

    def barrier(self, opts: Any = None) -> dist.Work:
        # GPU work queued before the barrier is finished first (NCCL's barrier gives the same),
        # then a host-level barrier over gloo, which needs no device.
        if self._cuda is not None:
            self._cuda.barrier()
        return self._cpu.pg.barrier(dist.BarrierOptions())

    # ---- helpers ----
    @staticmethod
    def _chain(works: list[dist.Work], results: list[torch.Tensor]) -> dist.Work:
        from .works import completed_work

        if len(works) == 1:
            return works[0]
        for w in works:
            w.wait()
        return completed_work(results)

    def shutdown(self) -> None:
        for inner in (self._cpu.pg, getattr(self._cuda, "nccl", None)):
            if inner is not None and hasattr(inner, "shutdown"):
                try:
                    inner.shutdown()
                except RuntimeError:
                    pass

    def __repr__(self) -> str:
        return f"SmddpProcessGroup(rank={self.rank()}, size={self.size()})"


def create_smddp_process_group(store: dist.Store, rank: int, size: int, timeout: timedelta) -> Any:
    """The creator ``dist.Backend.register_backend`` calls for every new group.

    With CUDA, the native C++ backend (native_backend.py) when it builds; otherwise, and on
    CPU-only machines (CI, local mode), this Python process group.
    """
    if torch.cuda.is_available() and hasattr(dist, "ProcessGroupNCCL"):
        from . import native_backend

        module = native_backend.load()
        if module is not None:
            return native_backend.create(module, store, rank, size, timeout)
    return SmddpProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register the backend name (idempotent: a second import must not raise)."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, create_smddp_process_group, devices=["cpu", "cuda"])
