"""What a DescribeTrainingJob answer means for the caller. Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import JobFailedError
from ..states import JobState


@dataclass(frozen=True)
class SageMakerJob:
    """A submitted job. `status` is the last one seen (InProgress when not waited for)."""

    job_name: str
    region: str
    status: str
    arn: str | None = None
    model_data: str | None = None
    failure_reason: str | None = None
    submit_directory: str | None = None

    @property
    def console_url(self) -> str:
        return (f"https://{self.region}.console.aws.amazon.com/sagemaker/home?region={self.region}"
                f"#/jobs/{self.job_name}")


def job_from_description(description: dict[str, Any], region: str, submit_directory: str | None = None) -> SageMakerJob:
    return SageMakerJob(
        job_name=description["TrainingJobName"],
        region=region,
        status=description["TrainingJobStatus"],
        arn=description.get("TrainingJobArn"),
        model_data=(description.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        failure_reason=description.get("FailureReason"),
        submit_directory=submit_directory,
    )


def is_terminal(description: dict[str, Any]) -> bool:
    return JobState.of(description["TrainingJobStatus"]).is_terminal


def check_outcome(job: SageMakerJob) -> SageMakerJob:
    """The job if it completed; JobFailedError with SageMaker's FailureReason if it failed or was stopped."""
    if job.status == JobState.COMPLETED:
        return job
    reason = job.failure_reason or ("stopped before it completed (StopTrainingJob or the stopping condition)"
                                    if job.status == JobState.STOPPED else "no FailureReason given")
    diagnosis = f"{reason}\nlogs: CloudWatch /aws/sagemaker/TrainingJobs/{job.job_name}/*  console: {job.console_url}"
    raise JobFailedError(job.job_name, job.status, diagnosis)
