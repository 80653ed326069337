"""smddp: a torch.distributed backend named "smddp" (AWS SMDDP's name and usage).

``import smdist_launcher.smddp`` registers the backend, so the seed documents' two lines work::

    import smdist_launcher.smddp            # or: import smdistributed.dataparallel.torch.torch_smddp
    dist.init_process_group(backend="smddp")

CPU tensors run on gloo, CUDA tensors on NVLink fast paths (copy-engine AllGather, symmetric-
memory AllReduce) where measured faster, NCCL otherwise. Stdlib + torch only (GPU image).
"""
from __future__ import annotations

from .process_group import BACKEND_NAME, SmddpProcessGroup, register

register()

__all__ = ["BACKEND_NAME", "SmddpProcessGroup", "register", "force_path"]


def force_path(group: object, collective: str, path: str | None) -> None:
    """Pin ``collective`` ("all_gather", "all_reduce") of an smddp group to one path
    ("nccl", "ce", "one_shot", "two_shot"), or back to the routing table with ``None``.
    For benchmarks and tests; every rank of the group must make the same call."""
    if isinstance(group, SmddpProcessGroup):
        group.cuda_path.router.force(collective, path)
        return
    from .native_backend import force_native_path, native_backend_of

    native = native_backend_of(group)
    if native is None:
        raise TypeError(f"force_path: expected an smddp process group, got {type(group).__name__}")
    force_native_path(native, collective, path)
