"""SMDDP's legacy ``DistributedDataParallel``: torch's DDP over the job's "smddp" world.

The AWS signature is kept (module, device_ids, output_device, broadcast_buffers, process_group, bucket_cap_mb);
gradients are averaged over the group as AWS documents, and ``no_sync()`` is torch's. AWS asked for
broadcast_buffers=False because SMDDP could not broadcast buffers; torch's DDP can, so either value works here.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn


class DistributedDataParallel(nn.parallel.DistributedDataParallel):
    def __init__(self, module: nn.Module, device_ids: list[int] | None = None, output_device: Any = None,
                 broadcast_buffers: bool = True, process_group: Any = None, bucket_cap_mb: float | None = None,
                 **kwargs: Any) -> None:
        if not dist.is_initialized():
            raise RuntimeError("smdistributed.dataparallel DistributedDataParallel: call "
                               "smdistributed.dataparallel.torch.distributed.init_process_group() first")
        on_cpu = all(not p.is_cuda for p in module.parameters())
        if on_cpu and device_ids:
            raise ValueError(f"DistributedDataParallel: device_ids={device_ids} names CUDA devices but the module is "
                             "on the CPU; pass device_ids=None for CPU modules (or move the module to its GPU first)")
        if device_ids is None and not on_cpu and torch.cuda.is_available():
            device_ids = [torch.cuda.current_device()]  # SMDDP placed single-device modules on the current GPU
        super().__init__(module, device_ids=device_ids, output_device=output_device,
                         # None: torch's default (buffers synced), without its deprecation warning for True
                         broadcast_buffers=None if broadcast_buffers else False, process_group=process_group,
                         bucket_cap_mb=bucket_cap_mb, **kwargs)
