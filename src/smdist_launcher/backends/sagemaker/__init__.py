"""Amazon SageMaker backend: run a LaunchPlan as a CreateTrainingJob, wait for it and stream its CloudWatch logs.

    from smdist_launcher.backends.sagemaker import run_job, render_request
    job = run_job(plan, estimator=est)          # what PyTorch(..., instance_type="ml.p4d.24xlarge").fit() calls
    job.model_data, job.status, job.failure_reason
    render_request(plan, est.spec)              # the request for display (no AWS call, secrets redacted)
"""
from __future__ import annotations

from .request import build_request, render_request
from .status import SageMakerJob
from .submit import run_job, wait_for_job

__all__ = ["SageMakerJob", "build_request", "render_request", "run_job", "wait_for_job"]
