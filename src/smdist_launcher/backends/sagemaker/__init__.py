"""Amazon SageMaker backend: run a LaunchPlan as a CreateTrainingJob, wait for it and stream its CloudWatch logs.

    from smdist_launcher.backends.sagemaker import run_job, render_request
    job = run_job(est.submission(plan), wait=False)  # what SageMakerBackend.submit (fit on ml.* types) calls
    job.describe(); job.wait(logs="All"); job.stop(); job.logs(follow=True)
    job.model_data, job.status, job.failure_reason
    job = attach_job("my-job-2024-...")          # a TrainingJob for a job submitted earlier (or elsewhere)
    render_request(plan, est.spec)              # the request for display (no AWS call, secrets redacted)
"""
from __future__ import annotations

from .attach import attach_job, attached_arguments
from .job import TrainingJob
from .request import build_request, render_request
from .status import SageMakerJob
from .submit import run_job, wait_for_job

__all__ = ["SageMakerJob", "TrainingJob", "attach_job", "attached_arguments", "build_request", "render_request",
           "run_job", "wait_for_job"]
