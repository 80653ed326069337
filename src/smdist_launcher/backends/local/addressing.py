"""Where the simulated hosts live on this machine: one loopback address each, a free master
port, and (local_gpu) their share of the visible GPUs."""
from __future__ import annotations

import ipaddress
import os
import random
import socket
from collections.abc import Mapping
from pathlib import Path

_LOOPBACK = int(ipaddress.IPv4Address("127.0.0.0"))


def host_addresses(hosts: list[str], block: int = 0) -> dict[str, str]:
    """algo-1 -> 127.<block>.0.2, algo-2 -> ...3 and so on inside 127.0.0.0/8.

    Linux routes all of 127/8 to lo, so each host gets its own address and traffic between
    them crosses "hosts" for real. `block` (0..254) keeps concurrent jobs apart."""
    if not 0 <= block < 255:
        raise ValueError(f"address block must be 0..254, got {block}")
    first = _LOOPBACK + (block << 16) + 2
    if len(hosts) > (1 << 16) - 3:
        raise ValueError(f"instance_count: {len(hosts)} simulated hosts do not fit one loopback block")
    return {h: str(ipaddress.IPv4Address(first + i)) for i, h in enumerate(hosts)}


def pick_address_block() -> int:
    # 127.0.0.x is what people use by hand: start at 1 to stay out of their way.
    return random.randint(1, 254)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_port(tries: int = 50) -> int:
    """A TCP port nobody listens on right now (on any address: torchrun's store binds them all).

    Taken BELOW the kernel's ephemeral range: ports there are never handed out to outgoing
    connections, so between this check and the master binding it only an explicit bind (another
    job) can take it, not one of the many connections a busy machine opens."""
    low, _ = _ephemeral_range()
    start = max(1024, low - 12000)
    for _ in range(tries):
        port = random.randint(start, low - 1)
        if _bindable(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else the driver's list (no torch import)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"]
    gpus = Path("/proc/driver/nvidia/gpus")
    count = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    return [str(i) for i in range(count)]


def split_gpus(gpus: list[str], hosts: list[str], processes_per_host: int) -> dict[str, list[str]]:
    """Give each simulated host an equal, disjoint share of the GPUs (2 hosts x 2 on a 4-GPU box)."""
    per_host = len(gpus) // len(hosts) if hosts else 0
    if per_host == 0:
        raise ValueError(
            f"instance_type: local_gpu needs at least one GPU per simulated host; {len(gpus)} visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}) for {len(hosts)} hosts. "
            "Lower instance_count or use instance_type 'local' (CPU)"
        )
    if processes_per_host > per_host:
        raise ValueError(
            f"processes_per_host: {processes_per_host} processes per host but only {per_host} GPU(s) per simulated "
            f"host ({len(gpus)} visible / {len(hosts)} hosts). Lower processes_per_host or instance_count"
        )
    return {h: gpus[i * per_host:(i + 1) * per_host] for i, h in enumerate(hosts)}
