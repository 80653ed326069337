"""Join the job's torch.distributed world, whichever launcher started us (torchrun or mpirun)."""
from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

# mpirun (SMP v1's launcher) exports OMPI_COMM_WORLD_*; torch.distributed's env:// wants RANK etc.
_OMPI_TO_TORCH = {
    "OMPI_COMM_WORLD_RANK": "RANK",
    "OMPI_COMM_WORLD_SIZE": "WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK": "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "LOCAL_WORLD_SIZE",
}


def export_launcher_env(environ: dict[str, str] | None = None) -> None:
    """Fill RANK/WORLD_SIZE/LOCAL_RANK from OpenMPI's variables when torchrun did not set them."""
    env = os.environ if environ is None else environ
    for ompi, torch_name in _OMPI_TO_TORCH.items():
        if ompi in env and torch_name not in env:
            env[torch_name] = env[ompi]
    env.setdefault("MASTER_ADDR", "127.0.0.1")


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))


def local_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")))


def device_type() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def current_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def ensure_initialized(timeout_s: float | None = None) -> None:
    """Initialize the default process group (nccl on GPUs, gloo on CPU) unless the script already did."""
    if dist.is_initialized():
        return
    export_launcher_env()
    if "MASTER_PORT" not in os.environ:
        raise RuntimeError(
            "smp: MASTER_PORT is not set; start the script with torchrun, smdist-train or mpirun "
            "with MASTER_ADDR/MASTER_PORT exported (the launcher sets them)")
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank() % torch.cuda.device_count())
    timeout = None if timeout_s is None else timedelta(seconds=timeout_s)  # None: torch's default
    if torch.cuda.is_available():
        dist.init_process_group("cuda:nccl,cpu:gloo", timeout=timeout,
                                device_id=torch.device("cuda", torch.cuda.current_device()))
    else:
        dist.init_process_group("gloo", timeout=timeout)
