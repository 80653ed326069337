"""The SageMaker backend behind the interface (backends/api.py): the dry run is the CreateTrainingJob request
(secrets redacted, no AWS call), submit uploads the code and creates the job, describe/stop/logs ask SageMaker.

A job submitted with a jobs folder is recorded there (job.json with backend "sagemaker"), so `smdist jobs`, `status`,
`stop` and `logs` find it beside local jobs; a job without a record is found by name in its region."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ...errors import ValidationError
from ...jobspec.error_items import item
from ...jobspec.rules.arguments import region_problem
from ...plan.model import LaunchPlan
from ..api import DryRun, Emit, JobHandle, JobState, JobStatus, Submission, validated_options
from ..secondary_status import phase_of_secondary
from ..toolkit.jobdir import JobDir
from ..toolkit.records import JobRecord

BACKEND = "sagemaker"


class SageMakerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str | None = Field(default=None,
                               description="the AWS region (default: the job's region, else $AWS_REGION / "
                                           "the profile's)")
    poll_interval_s: float | None = Field(default=None, gt=0, description="seconds between DescribeTrainingJob calls")


def request_for(submission: Submission, region: str | None = None) -> dict[str, Any]:
    """The request for display; `<region>`, `<account>` (and `<role>` without a role) stand for what only AWS knows.
    ValidationError with everything that would stop the submission before it reaches AWS (local instance types,
    non-S3 channels, no derivable image, API limits)."""
    from . import preflight
    from .request import render_request

    args = submission.args()
    region = region or args.region
    bad_region = region_problem(region) if region is not None else None
    problems = [item("region", bad_region, region)] if bad_region else []
    # a missing role is shown as a placeholder: the request is still worth reading
    problems += [p for p in preflight.problems(submission.plan, args) if p.path != "role"]
    if problems:
        raise ValidationError(problems)
    return render_request(submission.plan, args, region=region)


class SageMakerBackend:
    name: ClassVar[str] = BACKEND
    description: ClassVar[str] = "Amazon SageMaker (or anything that speaks its API): CreateTrainingJob"
    Options: ClassVar[type[BaseModel]] = SageMakerOptions
    runs: ClassVar[frozenset[str]] = frozenset({"ml"})

    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun:
        opts = validated_options(SageMakerOptions, options, "sagemaker")
        assert isinstance(opts, SageMakerOptions)
        return DryRun(backend=self.name, submission=submission, options=opts, what="the CreateTrainingJob request",
                      content=request_for(submission, opts.region))

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> Any:
        from .submit import run_job

        opts = dryrun.options
        submission = dryrun.submission
        if opts.region:
            submission = submission.model_copy(update={"settings": submission.args().model_copy(
                update={"region": opts.region})})
        job = run_job(submission, wait=False, logs=logs, poll_interval_s=opts.poll_interval_s)
        if jobs_root is not None:
            record = record_submission(Path(jobs_root), job, submission.plan)
            job.handle = job.handle.model_copy(update={"job_dir": record.job_dir})
        if wait:
            job.wait(logs=logs, interval=opts.poll_interval_s)
        return job

    def describe(self, handle: JobHandle) -> JobStatus:
        if handle.job_dir:
            record = refresh(Path(handle.job_dir))
            return JobStatus(job_name=record.job_name, backend=self.name, state=JobState.of(record.status),
                             phase=record.secondary_status or record.phase, reason=record.failure_reason,
                             model_data=record.model_data,
                             created=record.created, ended=record.ended)
        job = _job(handle)
        return JobStatus(job_name=job.job_name, backend=self.name, state=JobState.of(job.status),
                         phase=job.secondary_status, reason=job.failure_reason, model_data=job.model_data)

    def stop(self, handle: JobHandle) -> str:
        _job(handle).stop()
        return f"asked sagemaker to stop {handle.job_name}"

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        if hosts:
            raise ValueError("--host: SageMaker jobs show every host's log stream, each line prefixed [algo-N]")
        _job(handle, emit).logs(follow=follow)


def _job(handle: JobHandle, emit: Emit | None = None) -> Any:
    """The TrainingJob of a handle: from its record (region, ARN, code) when it has one, else looked up by name."""
    from .attach import attach_job, checked_clients
    from .job import TrainingJob, _say

    if handle.job_dir:
        record = JobRecord.load(JobDir(Path(handle.job_dir)).record_file)
        info = record.backend_info
        return TrainingJob(checked_clients(info["region"]), record.job_name, arn=info.get("arn"),
                           submit_directory=info.get("submit_directory"), emit=emit or _say)
    return attach_job(handle.job_name, region=handle.region, emit=emit or _say)


def record_submission(root: Path, job: Any, plan: LaunchPlan) -> JobRecord:
    """A job.json for a submitted job (no hosts run here: the folder holds only the record)."""
    job_dir = JobDir.create(root, job.job_name)
    record = JobRecord(job_name=job.job_name, job_id=job.job_name, job_dir=str(job_dir.root), backend=BACKEND,
                       backend_info={"region": job.region, "arn": job.arn, "submit_directory": job.submit_directory},
                       plan=plan.to_dict(), launcher_pid=0)  # no launcher here: SageMaker runs it
    _apply(record, job.describe())
    record.save(job_dir.record_file)
    return record


def _apply(record: JobRecord, description: dict[str, Any]) -> None:
    record.status = JobState.of(description["TrainingJobStatus"])
    secondary = description.get("SecondaryStatus")
    if secondary:  # SageMaker's own word kept beside the Phase it maps to (records read it back as a Phase)
        record.secondary_status = secondary
        phase = phase_of_secondary(secondary)
        if phase is not None and phase != record.phase:
            record.enter_phase(phase)
    record.failure_reason = description.get("FailureReason")
    record.model_data = (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if JobState.of(record.status).is_terminal and record.ended is None:
        end = description.get("TrainingEndTime") or description.get("LastModifiedTime")
        record.ended = end.timestamp() if end is not None and hasattr(end, "timestamp") else time.time()


def refresh(job_dir: Path) -> JobRecord:
    """The record, updated from DescribeTrainingJob (unchanged once final)."""
    path = JobDir(Path(job_dir)).record_file
    record = JobRecord.load(path)
    if not JobState.of(record.status).is_terminal:
        _apply(record, _job(JobHandle(backend=BACKEND, job_name=record.job_name, job_dir=str(job_dir))).describe())
        record.save(path)
    return record
