"""An attempt's hosts, staged from scratch and turned into what the supervisor starts: the host staging of a local
job (the same for every attempt), each host's environment, and the placement's command for it."""
from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...container.host_resilience import RESILIENCE_ENV
from ...container.stack_dumps import STACKS_ON_STOP_ENV
from ...contract import MLPaths
from ...plan.model import LaunchPlan
from ..toolkit import records
from ..toolkit.attempt.host_staging import stage_hosts
from ..toolkit.jobdir import JobDir
from ..toolkit.outputs import checkpoint_dir
from ..toolkit.resilience_plan import ATTEMPT_ENV, ResiliencePlan
from ..toolkit.staging import LocalCode
from ..toolkit.supervisor import HostLaunch
from .addressing import free_port, host_addresses, pick_address_block, split_gpus, visible_gpus
from .host_environment import host_environment
from .localize import with_interface, with_master_port
from .placement import HostStart, Placement, PlacementJob, runtime_command

GPU_INSTANCE_TYPES = ("local_gpu",)


@dataclass(frozen=True)
class StagedAttempt:
    launches: list[HostLaunch]
    hosts: dict[str, MLPaths]
    restored: int                   # checkpoint files restored into the fresh trees
    placement_job: PlacementJob     # what the placement saw (its teardown gets the same)


@dataclass(frozen=True)
class HostStager:
    """The job's constants; stage() once per attempt."""

    job_id: str
    job_dir: JobDir
    code: LocalCode | None
    placement: Placement
    environ: dict[str, str]
    resilience: ResiliencePlan
    note: Callable[[str], None]

    def plan_for_hosts(self, plan: LaunchPlan) -> LaunchPlan:
        """Hosts with a network of their own talk over it (plan.json keeps lo)."""
        return with_interface(plan, self.placement.interface) if self.placement.interface is not None else plan

    def stage(self, plan: LaunchPlan, attempt: int, record: records.JobRecord) -> StagedAttempt:
        """Stage every host from scratch, set up the placement, and build each host's launch. The record gets each
        host's facts (gpus, root, address) and the run's local changes (master port, temporary folder)."""
        names = plan.host_names
        gpu_split = (split_gpus(visible_gpus(self.environ), names, plan.processes_per_host)
                     if plan.instance_type in GPU_INSTANCE_TYPES else None)
        shortcuts = self.placement.shortcuts
        addresses = host_addresses(names, pick_address_block()) if shortcuts else None
        run_plan = with_master_port(plan, free_port())
        staged = stage_hosts(self.job_dir, plan, self.code, config_plan=run_plan.to_dict())
        hosts = staged.hosts
        if staged.restored:
            self.note(f"restored {staged.restored} checkpoint file(s) from {plan.checkpoint_s3_uri}")
        if attempt == 1 and any((p.code_dir / "requirements.txt").is_file() for p in hosts.values()):
            self.note("requirements.txt is not installed in local mode (it would change this Python environment); "
                      "install it yourself")
        host_roots = {h: str(p.root) for h, p in hosts.items()}
        # Temporary files of the hosts (OpenMPI session dirs, tempfile) go to a short per-job folder
        # that is removed afterwards: short, because OpenMPI puts unix sockets there (108-byte limit).
        tmp_root = Path(tempfile.mkdtemp(prefix="smdist-"))
        for h in names:
            record.hosts[h] = {"gpus": gpu_split[h] if gpu_split else [], "root": host_roots[h],
                               **({"address": addresses[h]} if addresses else {})}
        record.local = {"master_port": run_plan.master.port, "tmpdir": str(tmp_root)}
        job = PlacementJob(job_id=self.job_id, job_root=self.job_dir.root, plan=plan, environ=self.environ,
                           tmp_root=tmp_root, hosts=record.hosts, backend_info=record.backend_info)
        self.placement.setup(job)
        host_resilience = self.resilience.for_hosts(watch_logs=False)  # the job's loop watches the logs itself
        launches = []
        for h in names:
            env = host_environment(
                run_plan, h, self.environ, job_id=self.job_id, addresses=addresses,
                host_roots=host_roots if shortcuts else None,
                gpus=gpu_split[h] if gpu_split else None, checkpoint_dir=str(checkpoint_dir(plan, hosts[h])))
            # Each host's runtime makes its own folder in here (TMPDIR, Open MPI: container/host_isolation.py).
            env["TMPDIR"] = str(tmp_root)
            env[STACKS_ON_STOP_ENV] = "0"  # the supervisor asks the ranks where they are stuck before it stops them
            env[ATTEMPT_ENV] = str(attempt)  # which attempt this is (1 for the first): the script's, the faults' marker
            if host_resilience.active:
                env[RESILIENCE_ENV] = host_resilience.encode()
            argv = runtime_command(sys.executable, host_roots[h], h, str(hosts[h].plan_file))
            launches.append(self.placement.launch(job, HostStart(h, hosts[h], env, self.job_dir.host_dir(h), argv)))
        return StagedAttempt(launches, hosts, staged.restored, job)
