"""The plan's network interface for hosts with a network of their own.

Local instance types plan for `lo` (every simulated host on loopback); a netns host talks over its `eth0`. The
plan the user sees keeps its interface; the hosts run this copy (like local mode's master port)."""
from __future__ import annotations

from ...plan.model import HostPlan, LaunchPlan

_IFACE_MCA = ("btl_tcp_if_include", "oob_tcp_if_include")
_IFACE_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def _argv(argv: list[str], old: str, new: str) -> list[str]:
    out = list(argv)
    for i in range(1, len(out)):
        if out[i] == old and out[i - 1] in _IFACE_MCA:
            out[i] = new
        elif any(out[i] == f"{name}={old}" for name in _IFACE_ENV):
            out[i] = f"{out[i].partition('=')[0]}={new}"
    return out


def _env(env: dict[str, str], old: str, new: str) -> dict[str, str]:
    return {k: (new if k in _IFACE_ENV and v == old else v) for k, v in env.items()}


def with_interface(plan: LaunchPlan, new: str) -> LaunchPlan:
    old = plan.network_interface
    if old == new:
        return plan
    hosts: list[HostPlan] = [h.model_copy(update={"argv": _argv(h.argv, old, new), "env": _env(h.env, old, new)})
                             for h in plan.hosts]
    return plan.model_copy(update={"network_interface": new, "hosts": hosts,
                                   "environment": _env(plan.environment, old, new)})
