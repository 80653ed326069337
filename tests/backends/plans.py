"""Hand-made launch plans for backend unit tests (no estimator, no planner)."""
from __future__ import annotations

from typing import Any

from smdist_launcher.plan.model import Channel, HostPlan, LaunchPlan, Master


def tiny_plan(hosts: int = 2, *, argv: list[str] | None = None, channels: dict[str, str | Channel] | None = None,
              **updates: Any) -> LaunchPlan:
    argv = argv or ["torchrun", "--nnodes", str(hosts), "--master_addr", "algo-1", "--master_port", "7777", "train.py"]
    host_plans = [HostPlan(name=f"algo-{i}", role="node", processes=1, ranks=[i - 1], argv=argv,
                           env={"MASTER_PORT": "7777"}) for i in range(1, hosts + 1)]
    fields: dict[str, Any] = dict(
        job_name="tiny", framework="pytorch", launcher="torchrun", strategy="torch_distributed",
        instance_type="local", instance_count=hosts, processes_per_host=1, world_size=hosts,
        network_interface="lo", master=Master(host="algo-1", port=7777), entry_point="train.py", hosts=host_plans,
        channels={k: (v if isinstance(v, Channel) else Channel(uri=v)) for k, v in (channels or {}).items()},
    )
    fields.update(updates)
    return LaunchPlan(**fields)
