"""backends/slurm: run a LaunchPlan on a Slurm cluster (SageMaker HyperPod's Slurm orchestrator included).

`SlurmBackend` (backend.py) is its side of backends/api.py; `run_slurm_job(submission, SlurmOptions(...))` stages
the job folder on a shared path, submits the plan's sbatch script (`sbatch_script`, pure) and follows it; `SlurmJob`
has the local job's surface. See README.md. Light on purpose: each node's entry point imports only what it needs."""
from __future__ import annotations

from typing import Any

__all__ = ["SlurmBackend", "SlurmJob", "SlurmOptions", "run_slurm_job", "sbatch_script", "submit_slurm_job"]


def __getattr__(name: str) -> Any:
    if name in ("SlurmJob", "run_slurm_job", "submit_slurm_job"):
        from . import job
        return getattr(job, name)
    if name == "SlurmOptions":
        from .options import SlurmOptions
        return SlurmOptions
    if name == "sbatch_script":
        from .script import sbatch_script
        return sbatch_script
    if name == "SlurmBackend":
        from .backend import SlurmBackend
        return SlurmBackend
    raise AttributeError(name)
