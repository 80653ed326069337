"""The collectives of an inner c10d ``Backend`` (ProcessGroupGloo, ProcessGroupNCCL) that the paths call.

pybind defines them on ``torch._C._distributed_c10d.Backend``, but torch's type stubs (2.13) declare none of
them there, so the paths see their inner groups through this protocol (``cast`` once, where the group is made).
The ``opts`` are the matching ``*Options`` objects; the paths pass on whatever their caller gave.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.distributed as dist


class C10dBackend(Protocol):
    def allreduce(self, tensors: list[torch.Tensor], opts: Any, /) -> dist.Work: ...

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any, /) -> dist.Work: ...

    def reduce(self, tensors: list[torch.Tensor], opts: Any, /) -> dist.Work: ...

    def reduce_scatter(
        self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: Any, /
    ) -> dist.Work: ...

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any, /) -> dist.Work: ...

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any, /) -> dist.Work: ...

    def barrier(self, opts: Any, /) -> dist.Work: ...

    def shutdown(self) -> None: ...
