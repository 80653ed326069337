"""CUDA tensors: NVLink fast paths where the routing table says they win, NCCL for the rest.

Fast paths run on the caller's current CUDA stream (like NCCL with async_op=False) and
return a Work whose ``wait()`` orders the waiting stream after them. Everything else
(other ops/dtypes, odd shapes, groups spanning hosts, ``SMDDP_DISABLE_FAST_PATHS=1``)
is handed to an inner ProcessGroupNCCL unchanged, so a fast path is never a correctness risk.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from .fast_allgather import ce_options
from .fast_setup import check_same_routes
from .reduce_ops import op_name
from .routing import Router, route_plan
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
        # the GPU model picks its measured table, as the native group does (H100's copy engines lose at 1 GiB)
        self.router = Router(gpu=torch.cuda.get_device_name())
        check_same_routes(store, rank, size, route_plan(self.router, size, "python"))
        # Read once: a bad SMDDP_CE_* setting fails here, at init_process_group, not at the first call.
        self.ce_options = ce_options(size)
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
        from .fast_setup import set_up_fast_paths

        paths = set_up_fast_paths(self.store, self.rank, self.size, self.timeout, device, self._group_name(),
                                  self.ce_options)
        if isinstance(paths, str):
            return paths
        try:
            from .fast_allreduce import SymmMemAllReduce

            self.allreduce_symm = SymmMemAllReduce(paths.symm_name, device, self.size)
        except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
            return f"symmetric memory unavailable ({exc})"
        self.allgather_ce = paths.allgather
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
            if not CopyEngineAllGather.capturing() and self._fast_ready(output.device):
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
