"""A running local job listens on its loopback addresses only: every listening TCP socket of every process of the
job (torchrun's rendezvous store, rank 0's TCPStore, gloo, mpirun's and orted's ports, the rsh server) is checked
while the job hangs, then each port is tried through this machine's non-loopback address and must refuse."""
from __future__ import annotations

import errno
import ipaddress
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from smdist_launcher.backends.local import run_job
from smdist_launcher.backends.toolkit.process_sweep import job_processes

HANG = r'''
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"ready-{rank}"), "w").close()
time.sleep(3600)
'''
_TCP_STATE_LISTEN = "0A"


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:  # gone
        pass
    return inodes


def _address(hex_addr: str) -> tuple[str, int]:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four little-endian 32-bit words
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return ip, int(port, 16)


def listening_sockets(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every listening TCP socket the processes hold (read from /proc/<pid>/net/tcp{,6})."""
    found = []
    for pid in pids:
        inodes = _socket_inodes(pid)
        for table in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                fields = line.split()
                if fields[3] == _TCP_STATE_LISTEN and fields[9] in inodes:
                    found.append((pid, *_address(fields[1])))
    return sorted(set(found))


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def external_ipv4() -> str | None:
    """This machine's first non-loopback IPv4 address (`ip -4 addr`; without iproute2, the source address of the
    default route), or None."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        ip = line.split()[3].split("/")[0]
        if not ipaddress.ip_address(ip).is_loopback:
            return ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # UDP connect sends nothing: it only picks the route's source address
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ipaddress.ip_address(ip).is_loopback else ip


def _connect_result(ip: str, port: int) -> int:
    with socket.socket() as s:
        s.settimeout(10)
        return s.connect_ex((ip, port))


def _wait_ready(job, n: int, timeout: float = 120) -> None:
    roots = [job.dir.host_root(h) for h in job.plan.host_names]
    deadline = time.monotonic() + timeout
    while sum(len(list((r / "output" / "data").glob("ready-*"))) for r in roots) < n:
        if time.monotonic() > deadline or job.status != "InProgress":
            raise AssertionError(f"the job did not get ready: {job.status} {job.diagnosis}")
        time.sleep(0.2)


@pytest.mark.parametrize("strategy", ["torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_local_job_listens_on_loopback_only(ws, strategy):
    plan = ws.plan(HANG, strategy=strategy, hosts=2, pph=2)
    job = run_job(plan, jobs_root=ws.jobs, wait=False, logs=False)
    try:
        _wait_ready(job, 4)
        pids = job_processes(job.job_id)
        sockets = listening_sockets(pids)
        assert sockets, "the job listens nowhere: the check would prove nothing"
        exposed = [s for s in sockets if not is_loopback(s[1])]
        assert exposed == [], f"listening beyond loopback (pid, address, port): {exposed}"
        external = external_ipv4()
        if external is not None:  # no other address on this machine: nothing to reach the job through
            reached = [(ip, port) for _, ip, port in sockets
                       if _connect_result(external, port) not in (errno.ECONNREFUSED,)]
            assert reached == [], f"reachable through {external}: {reached}"
    finally:
        job.stop("test over")
    assert job_processes(job.job_id) == []
