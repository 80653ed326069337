"""A private network for one job's simulated hosts: one network namespace per host, joined by a bridge that lives in
a namespace of its own, so nothing is added to the machine's root namespace (no link, no address, no rule).

    net = SimNetwork.create(["algo-1", "algo-2"])   # 10.213.<b>.1, .2 on eth0 of smdist-nn-<pid>-<tag>-h1, -h2
    ...
    net.destroy()                                    # kills what still runs inside, deletes the namespaces

Namespace names carry the launcher's pid: a later job deletes the namespaces of launchers that died (SIGKILL)."""
from __future__ import annotations

import os
import random
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..toolkit.process_sweep import kill_until_gone

PREFIX = "smdist-nn"
NETNS_DIR = Path("/run/netns")
SUBNET = "10.213.{block}.0/24"
CMD_TIMEOUT_S = 30
_NAME = re.compile(rf"^{PREFIX}-(\d+)-[0-9a-f]+-(sw|h\d+)$")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CMD_TIMEOUT_S)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")


def namespace_path(name: str) -> Path:
    return NETNS_DIR / name


def processes_in(name: str) -> list[int]:
    """Pids whose network namespace is `name` (compared by the namespace's inode)."""
    try:
        target = os.stat(namespace_path(name)).st_ino
    except OSError:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == target:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def kill_processes_in(names: list[str], attempts: int = 40, pause: float = 0.05) -> list[int]:
    """SIGKILL, by pid, everything still running inside our namespaces; returns the pids."""
    return kill_until_gone(lambda: [p for n in names for p in processes_in(n) if p != os.getpid()], attempts, pause)


def _delete(names: list[str]) -> None:
    kill_processes_in(names)
    for name in names:
        if namespace_path(name).exists():
            try:
                _ip("netns", "del", name)
            except (OSError, subprocess.TimeoutExpired):
                pass


def reap_stale() -> list[str]:
    """Delete the namespaces of netns-backend launchers that are no longer alive."""
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return []
    stale = []
    for name in names:
        m = _NAME.match(name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            stale.append(name)
    _delete(stale)
    return stale


@dataclass
class SimNetwork:
    hosts: dict[str, str]                 # host name -> its namespace
    addresses: dict[str, str]             # host name -> its address on eth0
    switch: str                           # the bridge's namespace
    subnet: str
    created: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, hosts: list[str], block: int | None = None) -> SimNetwork:
        block = random.randint(1, 254) if block is None else block
        if len(hosts) > 253:
            raise ValueError(f"instance_count: the netns backend simulates at most 253 hosts, got {len(hosts)}")
        tag = f"{PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        net = cls(hosts={h: f"{tag}-h{i + 1}" for i, h in enumerate(hosts)},
                  addresses={h: f"10.213.{block}.{i + 1}" for i, h in enumerate(hosts)},
                  switch=f"{tag}-sw", subnet=SUBNET.format(block=block))
        try:
            net._build()
        except BaseException:
            net.destroy()
            raise
        return net

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self.created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (host, ns) in enumerate(self.hosts.items(), start=1):
            self._add_namespace(ns)
            # Made inside the bridge's namespace, its peer straight in the host's: never in the root namespace.
            _ip("-n", self.switch, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", f"h{i}", "master", "br0")
            _ip("-n", self.switch, "link", "set", f"h{i}", "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def destroy(self) -> None:
        """Kill what still runs inside (by pid), delete the namespaces (their links go with them). Idempotent."""
        _delete(list(reversed(self.created)))
        self.created.clear()
