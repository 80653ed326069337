"""backends/slurm: run a LaunchPlan on a Slurm cluster (SageMaker HyperPod's Slurm orchestrator included).

`run_slurm_job(plan, SlurmOptions(...))` stages the job folder on a shared path, submits the plan's sbatch script
(`sbatch_script`, pure) and follows it; `SlurmJob` has the local job's surface. See README.md."""
from __future__ import annotations

from typing import Any

__all__ = ["SlurmJob", "SlurmOptions", "refresh", "run_job", "run_slurm_job", "sbatch_script", "stop_job",
           "submit_slurm_job"]


def run_job(plan: Any, *, estimator: Any = None, wait: bool = True, logs: Any = True, jobs_root: Any = None,
            slurm: Any = None) -> Any:
    """The backend registry's entry (backends/registry.py): `slurm` is a SlurmOptions or a dict of its fields."""
    from .job import run_slurm_job
    from .options import SlurmOptions, slurm_options

    options = slurm if isinstance(slurm, SlurmOptions) else slurm_options(slurm)
    return run_slurm_job(plan, options, estimator=estimator, wait=wait, logs=logs, jobs_root=jobs_root)


def refresh(job_dir: Any) -> Any:
    """The job record of a Slurm job folder, brought up to date with Slurm (`smdist status/jobs`)."""
    from ..toolkit.jobdir import JobDir
    from .job import refresh as _refresh

    return _refresh(JobDir(job_dir) if not isinstance(job_dir, JobDir) else job_dir)


def stop_job(job_dir: Any) -> None:
    """scancel the job of a Slurm job folder (`smdist stop`)."""
    from ..toolkit.jobdir import JobDir
    from .job import SlurmJob

    SlurmJob(JobDir(job_dir) if not isinstance(job_dir, JobDir) else job_dir, logs=False).stop()


def __getattr__(name: str) -> Any:  # lazy: the node entry point imports only what it needs
    if name in ("SlurmJob", "run_slurm_job", "submit_slurm_job"):
        from . import job
        return getattr(job, name)
    if name == "SlurmOptions":
        from .options import SlurmOptions
        return SlurmOptions
    if name == "sbatch_script":
        from .script import sbatch_script
        return sbatch_script
    raise AttributeError(name)
