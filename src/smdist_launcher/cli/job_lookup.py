"""A job named on the command line: its local record (any backend) or, without one, a SageMaker job."""
from __future__ import annotations

from typing import Any


def local_record(jobs_dir: str | None, name: str) -> Any | None:
    """The record of `name` (exact, else a unique prefix) in the jobs folder, or None."""
    from ..backends.toolkit.jobdir import jobs_root
    from .logs import find_job

    found = find_job(jobs_root(jobs_dir), name)
    return None if isinstance(found, str) else found


def sagemaker_job(name: str, region: str | None) -> Any:
    """The SageMaker job `name` (ClientError ValidationException when SageMaker does not know it)."""
    from ..backends.sagemaker import attach_job

    return attach_job(name, region=region)
