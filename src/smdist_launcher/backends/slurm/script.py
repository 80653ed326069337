"""The sbatch script for a launch plan: pure, deterministic, pinnable (`smdist plan --slurm`).

One Slurm node per plan host and one task per node; every task runs `smdist_launcher.backends.slurm.node`,
which picks its host (algo-<SLURM_NODEID + 1>) and execs `smdist-train` for it. Nothing of the job's data is in
the script: paths and the interpreter come from the environment `sbatch --export` gives it at submission, and
hyperparameters travel in the plan file of the job folder, so the script is the same for every submission of a plan.
"""
from __future__ import annotations

import math
import shlex

from ...plan.model import LaunchPlan
from .options import SlurmOptions

NODE_MODULE = "smdist_launcher.backends.slurm.node"
FINISH_MODULE = "smdist_launcher.backends.slurm.finish"


def slurm_time(seconds: int) -> str:
    """max_run (seconds) as sbatch --time D-HH:MM:SS, rounded up to whole minutes."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def gpus_per_node(plan: LaunchPlan, options: SlurmOptions) -> int:
    """--gpus-per-node: the option, else the instance type's GPUs (local_gpu: one per process)."""
    if options.gpus_per_node is not None:
        return options.gpus_per_node
    if plan.instance_type == "local_gpu":
        return plan.processes_per_host
    if plan.instance_type.startswith("ml."):
        from ...jobspec.catalog import is_known, lookup

        if is_known(plan.instance_type):
            return lookup(plan.instance_type).gpus
    return 0


def sbatch_directives(plan: LaunchPlan, options: SlurmOptions) -> list[str]:
    lines = [
        f"--job-name={plan.job_name}",
        f"--nodes={plan.instance_count}",
        "--ntasks-per-node=1",
        # the runtime on each node starts the ranks itself: give the task the whole node
        "--exclusive",
    ]
    time = options.time or (slurm_time(plan.max_run) if plan.max_run else None)
    if time:
        lines.append(f"--time={time}")
    for flag, value in (("partition", options.partition), ("account", options.account), ("qos", options.qos)):
        if value:
            lines.append(f"--{flag}={value}")
    gpus = gpus_per_node(plan, options)
    if gpus:
        lines.append(f"--gpus-per-node={gpus}")
    return lines


def _groups_note(plan: LaunchPlan) -> str:
    """Heterogeneous clusters get one allocation, not a Slurm heterogeneous job: the node script picks each host's
    group from the plan, so every node only needs the distribution group's resources."""
    if not plan.instance_groups or len(plan.instance_groups) < 2:
        return ""
    groups = ", ".join(f"{g.name} ({'..'.join(dict.fromkeys((g.hosts[0], g.hosts[-1])))}"
                       f"{', the distribution' if g.distribution else ''})" for g in plan.instance_groups)
    return (f"# Instance groups: {groups}. One allocation: "
            "every node gets the resources of the distribution's group.\n")


def srun_argv(plan: LaunchPlan) -> list[str]:
    """The job step that runs every node's host: the script's first attempt, and each later one (attempts.py)."""
    return ["srun", f"--nodes={plan.instance_count}", f"--ntasks={plan.instance_count}", "--ntasks-per-node=1",
            # one failing host ends the step on every node (SIGTERM, then SIGKILL after KillWait)
            "--kill-on-bad-exit=1", "--unbuffered"]


def sbatch_script(plan: LaunchPlan, options: SlurmOptions | None = None) -> str:
    options = options or SlurmOptions()
    directives = "\n".join(f"#SBATCH {d}" for d in sbatch_directives(plan, options))
    srun = shlex.join(srun_argv(plan))
    return f"""#!/bin/bash
# Slurm batch script for smdist job {plan.job_name}: {plan.instance_count} host(s) x {plan.processes_per_host} \
process(es), {plan.strategy} ({plan.launcher}). Generated from the launch plan by smdist-launcher.
{_groups_note(plan)}{directives}
#
# `smdist run --backend slurm` submits it with SMDIST_JOB_DIR (the job folder on a path every node shares:
# plan.json, each host's /opt/ml under hosts/<host>/opt/ml, logs) and SMDIST_PYTHON (the interpreter with
# smdist-launcher installed) in its environment.
set -euo pipefail
: "${{SMDIST_JOB_DIR:?submit this script with smdist run --backend slurm (SMDIST_JOB_DIR is not set)}}"
: "${{SMDIST_PYTHON:?submit this script with smdist run --backend slurm (SMDIST_PYTHON is not set)}}"
# Each node runs smdist-train for host algo-$((SLURM_NODEID + 1)); the hosts rendezvous on the first node.
rc=0
{srun} "$SMDIST_PYTHON" -m {NODE_MODULE} "$SMDIST_JOB_DIR" || rc=$?
# Outputs (model.tar.gz), the first failure and the job record, before the allocation ends.
"$SMDIST_PYTHON" -m {FINISH_MODULE} "$SMDIST_JOB_DIR" "$rc"
"""
