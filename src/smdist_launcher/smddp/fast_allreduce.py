"""Small/medium AllReduce through torch symmetric memory (one-shot and two-shot kernels).

One-shot: every rank reads all peers' staged inputs and reduces locally (lowest latency,
world_size x the reads). Two-shot: reduce-scatter + all-gather inside one kernel (less
traffic per rank, better from a few hundred KiB). Both are SUM-only; AVG divides afterwards.
Both kernels start with a barrier, so alternating two staging buffers needs no other sync.
"""
from __future__ import annotations

import logging
from typing import Any

import torch

from .fast_allgather import stage_copy
from .symm_buffers import GrowingPair


def hasattr_op(namespace: Any, name: str) -> bool:
    """torch.ops namespaces raise on unknown names instead of returning False."""
    try:
        getattr(namespace, name)
        return True
    except (AttributeError, RuntimeError):
        return False

log = logging.getLogger("smdist_launcher.smddp")

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ALIGN = 16  # the kernels load 16-byte vectors


class SymmMemAllReduce:
    """In-place SUM/AVG all_reduce of one contiguous CUDA tensor."""

    def __init__(self, group_name: str, device: torch.device, world_size: int) -> None:
        self.group_name = group_name
        self.world_size = world_size
        self.buffers = GrowingPair(group_name, device, world_size)
        self.ops: Any = torch.ops.symm_mem
        self.unsupported: set[tuple[str, torch.dtype, int]] = set()
        # how one-shot gets the input into the symmetric buffer: "fused" (the kernel copies it,
        # torch's one_shot_all_reduce_copy_out, when this torch has it), "kernel" or "memcpy"
        # (measured on 4x H200: fused 37 us < memcpy 49-58 us < kernel 56-68 us per call)
        self.stage = "fused" if hasattr_op(self.ops, "one_shot_all_reduce_copy_out") else "memcpy"

    def eligible(self, path: str, tensor: torch.Tensor, op: str) -> bool:
        return (
            op in ("sum", "avg")
            and tensor.dtype in SUPPORTED_DTYPES
            and (path, tensor.dtype, tensor.numel() * tensor.element_size()) not in self.unsupported
            and tensor.is_contiguous()
            and tensor.numel() * tensor.element_size() % ALIGN == 0
            and tensor.numel() > 0
        )

    def __call__(self, path: str, tensor: torch.Tensor, op: str) -> bool:
        """Run it; False if the op refused the input (dtype, alignment, size) in its host-side
        checks, before any launch: those checks see the same dtype and size on every rank, so
        every rank falls back to NCCL together."""
        nbytes = tensor.numel() * tensor.element_size()
        _, buf, _, _ = self.buffers.get(nbytes).next()
        staged = buf[:nbytes].view(tensor.dtype)
        flat = tensor.view(-1)
        try:
            if path == "one_shot":
                # The kernel stores 16-byte vectors; a misaligned view (ranks may differ, so this
                # cannot be an eligibility rule) gets an aligned temporary.
                aligned = flat.data_ptr() % ALIGN == 0
                out = flat if aligned else torch.empty_like(flat)
                if self.stage == "fused" and aligned:
                    self.ops.one_shot_all_reduce_copy_out(staged, flat, "sum", self.group_name, out)
                else:
                    stage_copy(staged.view(torch.uint8), flat.view(torch.uint8), self.stage != "memcpy")
                    self.ops.one_shot_all_reduce_out(staged, "sum", self.group_name, out)
                if not aligned:
                    flat.copy_(out)
            else:
                stage_copy(staged.view(torch.uint8), flat.view(torch.uint8), self.stage != "memcpy")
                self.ops.two_shot_all_reduce_(staged, "sum", self.group_name)
                stage_copy(flat.view(torch.uint8), staged.view(torch.uint8), self.stage != "memcpy")
        except RuntimeError as exc:
            self.unsupported.add((path, tensor.dtype, nbytes))
            log.info("smddp: %s all_reduce refused %s x %d bytes (%s); using NCCL", path, tensor.dtype, nbytes, exc)
            return False
        if op == "avg":
            tensor.div_(self.world_size)
        return True
