"""Environment the toolkit sets for collective communication, by instance capability (EFA, GPUDirect RDMA)."""
from __future__ import annotations

from ..jobspec.resolved import ResolvedJob

MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"


def master_env(master_host: str, master_port: int) -> dict[str, str]:
    """The PyTorch toolkit exports these on every host before starting any runner."""
    return {MASTER_ADDR: master_host, MASTER_PORT: str(master_port)}


def torchrun_network_env(job: ResolvedJob) -> dict[str, str]:
    """toolkit ``TorchDistributedRunner._setup``: always NCCL_SOCKET_IFNAME and NCCL_PROTO=simple (PR #196, EFA
    out-of-order delivery), EFA provider on EFA instances, device RDMA + fork safety on RDMA instances."""
    env = {"NCCL_SOCKET_IFNAME": job.network_interface, "NCCL_PROTO": "simple"}
    if job.instance.efa:
        env["FI_PROVIDER"] = "efa"
    if job.instance.efa_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
        env["RDMAV_FORK_SAFE"] = "1"
    return env
