"""A host tree staged from scratch: config, channels, code, the checkpoints restored from the checkpoint store.

Every attempt's hosts are staged by this one function, on trees no earlier attempt used (kept_layout.py), so staging
needs no idempotence: a single-file channel, a sharded one or a container command's copied channel is staged the
same way for attempt 2 as for attempt 1."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....contract import MLPaths, write_host_config
from ....plan.model import LaunchPlan
from ..jobdir import JobDir
from ..outputs import restore_checkpoints
from ..staging import LocalCode, stage_channels, stage_code


@dataclass(frozen=True)
class StagedHosts:
    hosts: dict[str, MLPaths]
    restored: int            # checkpoint files restored into the hosts' checkpoint folders


def stage_hosts(job: JobDir, plan: LaunchPlan, code: LocalCode | None, *,
                config_plan: dict[str, Any] | None = None) -> StagedHosts:
    """Stage every host of `plan` under job/hosts/<host>/opt/ml. `config_plan`: the plan the hosts' launchplan.json
    holds when not `plan` (local mode's master port)."""
    modes = {name: "File" for name in plan.channels}  # every channel as files, like SageMaker's local mode
    written = config_plan if config_plan is not None else plan.to_dict()
    for h in plan.host_names:
        if job.host_dir(h).exists():
            raise FileExistsError(f"{job.host_dir(h)} holds an earlier attempt's tree: keep it first "
                                  "(kept_layout.keep_hosts)")
    for h in plan.host_names:
        job.host_dir(h).mkdir(parents=True)  # ours (a fresh folder): the trusted anchor of the host's tree
    hosts = {h: write_host_config(job.host_root(h), written, h, channels=modes) for h in plan.host_names}
    stage_channels(plan, hosts, job.staging_dir)
    stage_code(code, hosts, keep_out=job.root.parent)
    return StagedHosts(hosts, restore_checkpoints(plan, hosts))
