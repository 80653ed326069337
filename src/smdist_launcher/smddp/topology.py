"""Is a process group one NVLink island? Fast paths need every rank on one host with P2P access."""
from __future__ import annotations

import socket

import torch
import torch.distributed as dist


def exchange_locations(store: dist.Store, rank: int, size: int, device_index: int) -> list[tuple[str, int]]:
    """(hostname, cuda device index) of every rank of the group, through the group's store."""
    store.set(f"smddp/where/{rank}", f"{socket.gethostname()}|{device_index}")
    out = []
    for r in range(size):
        host, _, dev = store.get(f"smddp/where/{r}").decode().rpartition("|")
        out.append((host, int(dev)))
    return out


def single_nvlink_island(locations: list[tuple[str, int]]) -> tuple[bool, str]:
    """(ok, why not) for a group's locations as returned by :func:`exchange_locations`."""
    hosts = {h for h, _ in locations}
    if len(hosts) != 1:
        return False, f"group spans {len(hosts)} hosts (inter-node traffic goes to NCCL)"
    devices = [d for _, d in locations]
    if len(set(devices)) != len(devices):
        return False, "two ranks share one GPU"
    for a in devices:
        for b in devices:
            if a != b and not torch.cuda.can_device_access_peer(a, b):
                return False, f"GPU {a} cannot access GPU {b} peer-to-peer"
    return True, ""
