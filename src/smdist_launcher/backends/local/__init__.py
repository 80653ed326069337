"""Local mode: run a LaunchPlan on this machine with one sandboxed runtime per simulated host.

    from smdist_launcher.backends.local import run_job
    job = run_job(plan)            # blocks, streams logs, raises JobFailedError on failure
    job.model_data, job.job_dir, job.status
"""
from __future__ import annotations

from .job import LocalJob, run_job

__all__ = ["LocalJob", "run_job"]
