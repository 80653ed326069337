"""SMDDP's legacy PyTorch API (library v1.0-1.3): ``import smdistributed.dataparallel.torch.distributed as dist``.

Every call is torch.distributed over the "smddp" backend (gloo for CPU tensors, NCCL and the fast paths for CUDA
tensors). AWS documents ``group`` as "only WORLD is supported"; here any torch.distributed group works, since the
calls are torch's. The launcher's environment (torchrun's RANK/..., or mpirun's OMPI_COMM_WORLD_* mapped by
``smddprun``) says who we are; ``init_process_group()`` ignores its arguments (the backend is always smddp), as in
SMDDP.
"""
from __future__ import annotations

import os
import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as _td

from . import BACKEND_NAME  # registers the backend
from .smddprun import SmddprunError, torch_env

group = _td.group
GroupMember = _td.GroupMember
Backend = _td.Backend
Work = _td.Work


class ReduceOp:
    """SMDDP's reduce ops: AVERAGE, SUM, MIN, MAX (plus torch's other names); the values are torch's ReduceOps."""

    SUM = _td.ReduceOp.SUM
    AVERAGE = _td.ReduceOp.AVG
    AVG = _td.ReduceOp.AVG
    MIN = _td.ReduceOp.MIN
    MAX = _td.ReduceOp.MAX
    PRODUCT = _td.ReduceOp.PRODUCT
    BAND = _td.ReduceOp.BAND
    BOR = _td.ReduceOp.BOR
    BXOR = _td.ReduceOp.BXOR


def is_available() -> bool:
    """True when the script was started as a distributed job (a launcher set the rank variables)."""
    env = os.environ
    return _td.is_available() and ("WORLD_SIZE" in env or "OMPI_COMM_WORLD_SIZE" in env or "PMI_SIZE" in env)


# torch.distributed.init_process_group's parameters a script may pass to the legacy call. AWS's v1 signature is
# init_process_group(*args, **kwargs) with "Inputs: None": the backend is always smddp and the job's launcher, not
# the script, decides who is in the world. So ``backend`` (AWS's own tests/data/pytorch_ddp/mnist_pt.py passes
# backend="nccl"), init_method, store, world_size, rank, group_name, pg_options and device_id are ignored, as SMDDP
# ignored them; only a ``timeout`` torch takes (a timedelta; it changes no membership) is passed on.
_TORCH_PARAMS = ("backend", "init_method", "timeout", "world_size", "rank", "store", "group_name", "pg_options",
                 "device_id")


def _ignored_mismatches(given: dict[str, Any]) -> list[str]:
    """The ignored rank/world_size values that differ from the job's: the script's idea of its place is wrong."""
    out = []
    for name, env_name in (("rank", "RANK"), ("world_size", "WORLD_SIZE")):
        value = given.get(name)
        if value is not None and value != -1 and str(value) != os.environ.get(env_name):
            out.append(f"{name}={value!r} (the job's is {os.environ.get(env_name)})")
    return out


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Join the job's world over the "smddp" backend. Idempotent, as SMDDP's was.

    Takes and ignores torch's arguments, as AWS's v1 API did ("Inputs: None"): the backend is always smddp, whatever
    ``backend`` says, and rank/world size come from the launcher. A ``timeout`` (timedelta) is honoured.
    """
    if _td.is_initialized():
        return
    # positional ones in torch's order; any others are ignored like the rest
    given = {**dict(zip(_TORCH_PARAMS, args, strict=False)), **kwargs}
    if "RANK" not in os.environ:  # started by plain mpirun: take the ranks from MPI, as smddprun does
        try:
            os.environ.update(torch_env(os.environ))
        except SmddprunError as e:
            raise RuntimeError(f"smdistributed.dataparallel.torch.distributed.init_process_group: {e}") from None
    if "MASTER_PORT" not in os.environ:
        raise RuntimeError(
            "smdistributed.dataparallel.torch.distributed.init_process_group: MASTER_PORT is not set; start the "
            "script with torchrun, smddprun (mpirun ... smddprun python train.py) or smdist-train")
    # SMDDP accepted anything here; say so where the script evidently expected an effect (a misspelt keyword, or
    # a rank/world size that is not the job's), but run on, as SMDDP did
    unknown = sorted(set(kwargs) - set(_TORCH_PARAMS))
    timeout = given.get("timeout")
    # torch takes only a timedelta (an int raises there); SMDDP took anything: one it cannot pass on is ignored too
    bad_timeout = [f"timeout={timeout!r} (not a datetime.timedelta)"] if (
        timeout is not None and not isinstance(timeout, timedelta)) else []
    mismatches = _ignored_mismatches(given) + [f"{k}=..." for k in unknown] + bad_timeout + (
        [f"{len(args) - len(_TORCH_PARAMS)} extra positional argument(s)"] if len(args) > len(_TORCH_PARAMS) else [])
    if mismatches:
        warnings.warn("smdistributed.dataparallel.torch.distributed.init_process_group ignores its arguments, as "
                      f"SMDDP does; the launcher's values are used, not {', '.join(mismatches)}", stacklevel=2)
    options: dict[str, Any] = {}
    if isinstance(timeout, timedelta):
        options["timeout"] = timeout
    _td.init_process_group(backend=BACKEND_NAME, init_method="env://", **options)


def is_initialized() -> bool:
    return _td.is_initialized()


def destroy_process_group(group: Any = None) -> None:
    _td.destroy_process_group(group)


def get_world_size(group: Any = None) -> int:
    return _td.get_world_size(group)


def get_rank(group: Any = None) -> int:
    return _td.get_rank(group)


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return default


def get_local_rank() -> int:
    """Rank among the processes of this host."""
    return _env_int(("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"), 0)


def get_local_size() -> int:
    """Number of processes on this host."""
    return _env_int(("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"), 1)


get_local_world_size = get_local_size


def get_backend(group: Any = None) -> str:
    return _td.get_backend(group)


def new_group(ranks: list[int] | None = None, timeout: timedelta | None = None, backend: str | None = None,
              **kwargs: Any) -> Any:
    return _td.new_group(ranks=ranks, timeout=timeout, backend=backend or BACKEND_NAME, **kwargs)


def barrier(group: Any = None, async_op: bool = False, **kwargs: Any) -> Any:
    return _td.barrier(group=group, async_op=async_op, **kwargs)


def all_reduce(tensor: torch.Tensor, op: Any = None, group: Any = None, async_op: bool = False) -> Any:
    return _td.all_reduce(tensor, op=ReduceOp.SUM if op is None else op, group=group, async_op=async_op)


def reduce(tensor: torch.Tensor, dst: int = 0, op: Any = None, group: Any = None, async_op: bool = False) -> Any:
    return _td.reduce(tensor, dst, op=ReduceOp.SUM if op is None else op, group=group, async_op=async_op)


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None, async_op: bool = False) -> Any:
    return _td.broadcast(tensor, src, group=group, async_op=async_op)


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group: Any = None,
               async_op: bool = False) -> Any:
    return _td.all_gather(tensor_list, tensor, group=group, async_op=async_op)


def all_to_all_single(output_t: torch.Tensor, input_t: torch.Tensor, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: Any = None, async_op: bool = False) -> Any:
    return _td.all_to_all_single(output_t, input_t, output_split_sizes, input_split_sizes, group=group,
                                 async_op=async_op)


# The rest of torch.distributed's collectives, under the same names (scripts written against either API).
gather = _td.gather
scatter = _td.scatter
reduce_scatter = _td.reduce_scatter
all_to_all = _td.all_to_all
all_gather_object = _td.all_gather_object
broadcast_object_list = _td.broadcast_object_list
send = _td.send
recv = _td.recv
isend = _td.isend
irecv = _td.irecv

__all__ = ["Backend", "GroupMember", "ReduceOp", "Work", "all_gather", "all_gather_object", "all_reduce", "all_to_all",
           "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "destroy_process_group", "gather",
           "get_backend", "get_local_rank", "get_local_size", "get_local_world_size", "get_rank", "get_world_size",
           "group", "init_process_group", "irecv", "is_available", "is_initialized", "isend", "new_group", "recv",
           "reduce", "reduce_scatter", "scatter", "send"]
