"""The one change local mode makes to a plan: its master port.

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
