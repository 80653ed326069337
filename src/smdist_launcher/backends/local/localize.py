"""The changes local mode makes to the copy of a plan its hosts run: the master port, and the network interface.

Every simulated host shares this machine, and torchrun's store binds the port on all
addresses, so two local jobs (or a test run with xdist) would collide on the plan's 7777.
The plan the user sees (plan.json) keeps 7777; the hosts run this copy."""
from __future__ import annotations

from ...plan.model import HostPlan, LaunchPlan

_PORT_FLAGS = ("--master_port", "--master-port")


def _argv_with_port(argv: list[str], old: str, new: str) -> list[str]:
    out = list(argv)
    for i, token in enumerate(out[:-1]):
        if token in _PORT_FLAGS and out[i + 1] == old:
            out[i + 1] = new
    for i, token in enumerate(out):
        for flag in _PORT_FLAGS:
            if token == f"{flag}={old}":
                out[i] = f"{flag}={new}"
    return out


def with_master_port(plan: LaunchPlan, port: int) -> LaunchPlan:
    old, new = str(plan.master.port), str(port)
    hosts: list[HostPlan] = []
    for h in plan.hosts:
        env = {k: (new if k == "MASTER_PORT" and v == old else v) for k, v in h.env.items()}
        hosts.append(h.model_copy(update={"argv": _argv_with_port(h.argv, old, new), "env": env}))
    environment = {k: (new if k == "MASTER_PORT" and v == old else v) for k, v in plan.environment.items()}
    return plan.model_copy(update={
        "master": plan.master.model_copy(update={"port": port}),
        "hosts": hosts,
        "environment": environment,
    })


# Local instance types plan for `lo` (every simulated host on loopback); a netns or docker host talks over its
# `eth0`. The plan the user sees keeps its interface; the hosts run this copy.
_IFACE_MCA = ("btl_tcp_if_include", "oob_tcp_if_include")
_IFACE_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def _argv_with_interface(argv: list[str], old: str, new: str) -> list[str]:
    out = list(argv)
    for i in range(1, len(out)):
        if out[i] == old and out[i - 1] in _IFACE_MCA:
            out[i] = new
        elif any(out[i] == f"{name}={old}" for name in _IFACE_ENV):
            out[i] = f"{out[i].partition('=')[0]}={new}"
    return out


def _env_with_interface(env: dict[str, str], old: str, new: str) -> dict[str, str]:
    return {k: (new if k in _IFACE_ENV and v == old else v) for k, v in env.items()}


def with_interface(plan: LaunchPlan, new: str) -> LaunchPlan:
    old = plan.network_interface
    if old == new:
        return plan
    hosts: list[HostPlan] = [h.model_copy(update={"argv": _argv_with_interface(h.argv, old, new),
                                                  "env": _env_with_interface(h.env, old, new)})
                             for h in plan.hosts]
    return plan.model_copy(update={"network_interface": new, "hosts": hosts,
                                   "environment": _env_with_interface(plan.environment, old, new)})
