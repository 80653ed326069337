"""The Slurm backend behind the interface (backends/api.py): the dry run is the sbatch script, the job folder on a
shared path is the job's state (job.py), status comes from Slurm (squeue/sacct) folded into the record."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from ..api import DryRun, Emit, JobHandle, JobStatus, Submission, validated_options
from ..toolkit import folder_jobs
from ..toolkit.jobdir import JobDir
from .options import SlurmOptions
from .script import sbatch_script


class SlurmBackend:
    name: ClassVar[str] = "slurm"
    description: ClassVar[str] = "one Slurm node per host: sbatch, follow, outputs"
    Options: ClassVar[type[BaseModel]] = SlurmOptions
    runs: ClassVar[frozenset[str]] = frozenset({"local", "ml"})

    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun:
        opts = validated_options(SlurmOptions, options, "slurm")
        assert isinstance(opts, SlurmOptions)
        # the run policy completed once from the options: faults checked against the job's hosts and ranks
        faults = opts.faults_for(submission.plan.host_names, submission.plan.world_size, "slurm")
        submission = submission.model_copy(update={"policy": submission.policy.with_options(faults=faults)})
        return DryRun(backend=self.name, submission=submission, options=opts, what="the sbatch script",
                      content=sbatch_script(submission.plan, opts), syntax="bash")

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> Any:
        from .job import run_slurm_job

        return run_slurm_job(dryrun.submission, dryrun.options, wait=wait, logs=logs, jobs_root=jobs_root)

    def _refreshed(self, handle: JobHandle) -> Any:
        from .job import refresh

        return refresh(JobDir(Path(folder_jobs.load_record(handle).job_dir)))

    def describe(self, handle: JobHandle) -> JobStatus:
        return folder_jobs.status_of(self._refreshed(handle), self.name)

    def stop(self, handle: JobHandle) -> str:
        from .job import SlurmJob

        job = SlurmJob(JobDir(Path(folder_jobs.load_record(handle).job_dir)), logs=False)
        job.stop()
        return f"asked slurm to stop {handle.job_name} (scancel {job.slurm_job_id})"

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        folder_jobs.follow_log_files(folder_jobs.load_record(handle), hosts, follow, emit,
                                     lambda: self._refreshed(handle))
