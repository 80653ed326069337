"""The plan of a container-command job (jobspec/container_command.py): every host of every group is a `node` that
runs the request's command once, as given. Ranks, world size and the master are the command's business (v3's drivers
start torchrun or mpirun with `algo-1:7777` themselves), so hosts carry no ranks, the world size shows 0 and the
master shown is the SageMaker convention the drivers follow (algo-1, 7777). Pure, like build_plan."""
from __future__ import annotations

from typing import Final

from ..jobspec.container_command import LOCAL_TYPE, ContainerCommandJob
from .model import Channel, HostPlan, InstanceGroupPlan, LaunchPlan, Master
from .topology import HOST_PREFIX, host_names

LAUNCHER: Final = "container_command"
# What SDK v3's drivers hard-code (sm_drivers/scripts/environment.py): the first host, port 7777.
V3_MASTER_PORT = 7777


def _groups(job: ContainerCommandJob) -> list[InstanceGroupPlan] | None:
    if not job.instance_groups:
        return None
    out, start = [], 1
    for g in job.instance_groups:
        hosts = [f"{HOST_PREFIX}{i}" for i in range(start, start + g.instance_count)]
        # every group runs the command: none is "the distribution's" (v3 has no such notion)
        out.append(InstanceGroupPlan(name=g.name, instance_type=LOCAL_TYPE, hosts=hosts, distribution=True))
        start += g.instance_count
    return out


def build_container_command_plan(job: ContainerCommandJob, channels: dict[str, Channel] | None = None) -> LaunchPlan:
    groups = _groups(job)
    names = [h for g in groups for h in g.hosts] if groups else host_names(job.instance_count)
    argv = job.argv
    hosts = [HostPlan(name=h, role="node", processes=1, ranks=[], argv=argv) for h in names]
    return LaunchPlan(
        job_name=job.job_name, framework="framework", launcher=LAUNCHER, strategy=LAUNCHER,
        instance_type=LOCAL_TYPE, instance_count=len(hosts), processes_per_host=1, world_size=0,
        network_interface="lo", master=Master(host=names[0], port=V3_MASTER_PORT), entry_point=argv[0],
        instance_groups=groups, hosts=hosts,
        # hyperparameters.json as sent: no re-encoding (v3 sends raw strings, v2 JSON text; both stay as they are)
        hyperparameters={}, sagemaker_hyperparameters=dict(job.hyperparameters),
        channels=dict(channels or {}), environment=dict(job.environment), max_run=job.max_run,
        output_path=job.output_path, checkpoint_s3_uri=job.checkpoint_s3_uri,
        checkpoint_local_path=job.checkpoint_local_path,
    )
