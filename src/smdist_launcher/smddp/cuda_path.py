"""CUDA tensors: NVLink fast paths where the routing table says they win, NCCL for the rest.

Fast paths run on the caller's current CUDA stream (like NCCL with async_op=False) and
return a Work whose ``wait()`` orders the waiting stream after them. Everything else
(other ops/dtypes, odd shapes, groups spanning hosts, ``SMDDP_DISABLE_FAST_PATHS=1``)
is handed to an inner ProcessGroupNCCL unchanged, so a fast path is never a correctness risk.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from .reduce_ops import op_name
from .routing import Router
from .works import completed_work

if TYPE_CHECKING:
    from .c10d_backend import C10dBackend

log = logging.getLogger("smdist_launcher.smddp")


class CudaPath:
    """Per process group: an inner NCCL group plus lazily-built fast paths."""

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        size: int,
        timeout: timedelta,
        group_name: Callable[[], str],
    ) -> None:
        self.store, self.rank, self.size, self.timeout = store, rank, size, timeout
        self._group_name = group_name
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        nccl = dist.ProcessGroupNCCL(dist.PrefixStore("smddp/nccl/", store), rank, size, options)
        self.nccl = cast("C10dBackend", nccl)
        self.router = Router()
        self._fast_state: str | None = None  # None = not decided, "on", or the reason it is off
        self.allgather_ce: Any = None
        self.allreduce_symm: Any = None

    # ---- fast path set-up (collective: runs at the same call on every rank) ----
    def _fast_ready(self, device: torch.device) -> bool:
        if self._fast_state is None:
            self._fast_state = self._set_up_fast_paths(device)
            if self._fast_state != "on":
                log.info("smddp: NVLink fast paths off for this group: %s", self._fast_state)
        return self._fast_state == "on"

    def _set_up_fast_paths(self, device: torch.device) -> str:
        if os.environ.get("SMDDP_DISABLE_FAST_PATHS", "0") == "1":
            return "SMDDP_DISABLE_FAST_PATHS=1"
        if self.size < 2:
            return "group of one rank"
        from .topology import exchange_locations, single_nvlink_island

        ok, why = single_nvlink_island(exchange_locations(self.store, self.rank, self.size, device.index or 0))
        if not ok:
            return why
        try:
            from .fast_allgather import CopyEngineAllGather
            from .fast_allreduce import SymmMemAllReduce
            from .symm_buffers import register_group

            name = register_group(self._group_name(), self.store, self.rank, self.size, self.timeout)
            # One copy per peer: a single copy-engine copy already fills a GPU's NVLink ingress
            # (the one-stream pull reached 387 GB/s algbw), and fewer copies = less CPU.
            splits = int(os.environ.get("SMDDP_CE_SPLITS", "1"))
            # Measured on 4x H200: pulling the 3 peers one after another (on one side stream)
            # runs at NCCL's speed; pulling them concurrently ran ~1.6x slower (contention).
            serial = os.environ.get("SMDDP_CE_SERIAL", "1" if self.size > 2 else "0") == "1"
            kernel_stage = os.environ.get("SMDDP_CE_KERNEL_STAGE", "0") == "1"
            self.allgather_ce = CopyEngineAllGather(name, device, self.rank, self.size, splits, serial, kernel_stage)
            self.allreduce_symm = SymmMemAllReduce(name, device, self.size)
        except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
            return f"symmetric memory unavailable ({exc})"
        return "on"

    # ---- collectives with fast paths ----
    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        if len(tensors) == 1:
            t = tensors[0]
            op = op_name(opts)
            path = self.router.choose("all_reduce", self.size, t.numel() * t.element_size())
            if path in ("one_shot", "two_shot") and self._fast_ready(t.device):
                if self.allreduce_symm.eligible(path, t, op) and self.allreduce_symm(path, t, op):
                    return completed_work(tensors)
        return self.nccl.allreduce(tensors, opts)

    def allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> dist.Work:
        from .fast_allgather import CopyEngineAllGather

        nbytes = output.numel() * output.element_size()
        if self.router.choose("all_gather", self.size, nbytes) == "ce" and CopyEngineAllGather.eligible(
            output, input, self.size
        ):
            if self._fast_ready(output.device):
                self.allgather_ce(output, input)
                return completed_work([output])
        return self.nccl._allgather_base(output, input, opts)

    def reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> dist.Work:
        # A copy engine cannot reduce, and NCCL's ring reduce-scatter measured at 315-321 GB/s
        # busbw at 1 GiB on 4 GPUs (~96% of line rate): no smddp path was worth building.
        return self.nccl._reduce_scatter_base(output, input, opts)

    def barrier(self) -> None:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def __getattr__(self, name: str) -> Any:
        if name == "nccl":  # not built yet (error inside __init__): no infinite recursion
            raise AttributeError(name)
        return getattr(self.nccl, name)
