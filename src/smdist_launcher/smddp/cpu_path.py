"""CPU tensors: delegate to an inner gloo process group, emulating what gloo lacks (AVG)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from .reduce_ops import ReduceOp, divide_in_place, is_op, with_sum
from .works import chained_work

if TYPE_CHECKING:
    from .c10d_backend import C10dBackend


class GlooPath:
    """Runs every collective on CPU tensors through ProcessGroupGloo."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        self.size = size
        # A prefix of its own so the inner group's keys never collide with the NCCL one's.
        gloo = dist.ProcessGroupGloo(dist.PrefixStore("smddp/gloo/", store), rank, size, timeout)
        self.pg = cast("C10dBackend", gloo)

    def _avg(
        self, opts: Any, options_type: type, run: Callable[[Any], dist.Work], results: list[torch.Tensor]
    ) -> dist.Work:
        work = run(with_sum(opts, options_type))
        return chained_work(work, lambda: divide_in_place(results, self.size), results)

    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        if is_op(opts, ReduceOp.AVG):
            return self._avg(opts, dist.AllreduceOptions, lambda o: self.pg.allreduce(tensors, o), tensors)
        return self.pg.allreduce(tensors, opts)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        # gloo's allreduce_coalesced wants one dtype; a per-tensor allreduce keeps mixed lists working.
        if len({t.dtype for t in tensors}) == 1:
            coalesced = dist.AllreduceCoalescedOptions()
            coalesced.reduceOp = ReduceOp(ReduceOp.SUM) if is_op(opts, ReduceOp.AVG) else opts.reduceOp
            work = self.pg.allreduce_coalesced(tensors, coalesced)
            if is_op(opts, ReduceOp.AVG):
                return chained_work(work, lambda: divide_in_place(tensors, self.size), tensors)
            return work
        works = [self.allreduce([t], opts) for t in tensors]
        for w in works[:-1]:
            w.wait()
        return works[-1]

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        if is_op(opts, ReduceOp.AVG):
            return self._avg(opts, dist.ReduceOptions, lambda o: self.pg.reduce(tensors, o), tensors)
        return self.pg.reduce(tensors, opts)

    def reduce_scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any) -> dist.Work:
        if is_op(opts, ReduceOp.AVG):
            return self._avg(
                opts, dist.ReduceScatterOptions, lambda o: self.pg.reduce_scatter(outputs, inputs, o), outputs
            )
        return self.pg.reduce_scatter(outputs, inputs, opts)

    def reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> dist.Work:
        if is_op(opts, ReduceOp.AVG):
            return self._avg(
                opts, dist.ReduceScatterOptions, lambda o: self.pg._reduce_scatter_base(output, input, o), [output]
            )
        return self.pg._reduce_scatter_base(output, input, opts)

    def allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any) -> dist.Work:
        return self.pg._allgather_base(output, input, opts)

    def __getattr__(self, name: str) -> Any:
        # Everything without a CPU-specific twist (broadcast, allgather, alltoall, send, ...)
        if name == "pg":  # not built yet (error inside __init__): no infinite recursion
            raise AttributeError(name)
        return getattr(self.pg, name)
