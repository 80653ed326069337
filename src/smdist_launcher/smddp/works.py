"""Work objects for collectives the backend runs itself (not the inner gloo/NCCL ones).

Stdlib + torch only: this module runs on the GPU image, which has no pydantic/yaml.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future  # type: ignore[attr-defined]  # not in torch's stub


def completed_work(tensors: Sequence[torch.Tensor]) -> dist.Work:
    """A Work that is already done (CPU) or done in the current CUDA stream's order.

    For CUDA tensors the Future is device-aware: ``set_result`` records an event on the
    current stream, and ``wait()`` makes the waiting stream wait for it, the same
    stream semantics ProcessGroupNCCL gives.
    """
    devices: list[int | str | torch.device] = sorted({t.device for t in tensors if t.is_cuda}, key=str)
    fut: torch.futures.Future = torch.futures.Future(devices=devices or None)
    fut.set_result(list(tensors))
    return _create_work_from_future(fut)


def chained_work(inner: dist.Work, then: Callable[[], None], result: Sequence[torch.Tensor]) -> dist.Work:
    """Wait for ``inner``, run ``then`` (e.g. the divide of an emulated AVG), resolve to ``result``."""

    def _finish(fut: torch.futures.Future) -> list[torch.Tensor]:
        fut.wait()  # re-raises the inner collective's error, if any
        then()
        return list(result)

    try:
        fut = inner.get_future()
    except RuntimeError:  # some gloo Work types have no Future: finish synchronously
        inner.wait()
        then()
        return completed_work(result)
    return _create_work_from_future(fut.then(_finish))
