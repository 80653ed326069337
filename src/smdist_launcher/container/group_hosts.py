"""Heterogeneous clusters on SageMaker: which algo-N hosts make up which instance group is SageMaker's choice, told
to each host in resourceconfig.json. The plan numbered hosts group by group (data: algo-1, train: algo-2..3), so
before a host picks its part, the plan's host names are renamed to the real ones, group by group, in numeric order.
Every host reads the same resourceconfig groups, so every host renames alike. Local mode writes resourceconfig.json
from the plan itself: nothing to rename there."""
from __future__ import annotations

import copy
import re
from typing import Any

from .addressing import map_argv, map_env_value

_NUMBER = re.compile(r"(\d+)$")


def _numeric(host: str) -> tuple[int, str]:
    m = _NUMBER.search(host)
    return (int(m.group(1)) if m else 0, host)


def real_host_names(plan: dict[str, Any], resource_config: dict[str, Any]) -> dict[str, str]:
    """{plan host: real host} for every host of a plan with instance groups ({} when there is nothing to rename).
    ValueError when the real groups do not match the plan's (names or host counts)."""
    planned = plan.get("instance_groups") or []
    real = {g.get("instance_group_name"): list(g.get("hosts") or [])
            for g in resource_config.get("instance_groups") or []}
    if len(planned) < 2 or not real:
        return {}
    mapping: dict[str, str] = {}
    for group in planned:
        hosts = real.get(group["name"])
        if hosts is None or len(hosts) != len(group["hosts"]):
            shape = ", ".join(f"{name}: {len(h)}" for name, h in real.items())
            raise ValueError(f"resourceconfig.json has instance groups {shape}, but the launch plan has "
                             f"{group['name']}: {len(group['hosts'])} host(s); the plan was made for another cluster")
        mapping.update(zip(group["hosts"], sorted(hosts, key=_numeric), strict=True))  # same length: checked above
    return mapping if any(k != v for k, v in mapping.items()) else {}


def rename_hosts(plan: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """The plan with host names renamed everywhere they appear: hosts, master, groups, argv and env (mpirun's
    --host list, torchrun's --master_addr, MASTER_ADDR, TF_CONFIG)."""
    if not mapping:
        return plan
    out = copy.deepcopy(plan)
    for host in out["hosts"]:
        host["name"] = mapping.get(host["name"], host["name"])
        host["argv"] = map_argv(host.get("argv") or [], mapping)
        host["env"] = {k: map_env_value(k, v, mapping) for k, v in (host.get("env") or {}).items()}
    if out.get("master"):
        out["master"]["host"] = mapping.get(out["master"]["host"], out["master"]["host"])
    for group in out.get("instance_groups") or []:
        group["hosts"] = [mapping.get(h, h) for h in group["hosts"]]
    return out
