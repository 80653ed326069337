"""A job named on the command line: its record in the jobs folder (any backend) or, without one, a SageMaker job;
either way a backend (backends/registry.py) and a handle to ask it with."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import Backend, JobHandle
    from ..backends.toolkit.records import JobRecord


def find_job(root: Path, wanted: str | None) -> JobRecord | str:
    """The record of `wanted` (exact, else a unique prefix; None: the latest job), or why there is none."""
    from ..backends.local.recovery import finalize_if_interrupted
    from ..backends.toolkit.jobdir import JOBS_ROOT_RULE
    from ..backends.toolkit.records import list_records

    records = list_records(root)
    if not records:
        return f"no jobs in {root} (the jobs folder is {JOBS_ROOT_RULE})"
    if wanted is None:
        return finalize_if_interrupted(records[-1])  # a job whose launcher died is finished before it is shown
    exact = [r for r in records if r.job_name == wanted]
    matches = exact or [r for r in records if r.job_name.startswith(wanted)]
    if len(matches) == 1:
        return finalize_if_interrupted(matches[0])
    if not matches:
        return f"job: no job named {wanted!r} in {root}; see `smdist jobs`"
    names = ", ".join(r.job_name for r in matches[:5])
    return f"job: {wanted!r} matches {len(matches)} jobs ({names}); give more of the name"


def local_record(jobs_dir: str | None, name: str) -> JobRecord | None:
    """The record of `name` (exact, else a unique prefix) in the jobs folder, or None."""
    from ..backends.toolkit.jobdir import jobs_root

    found = find_job(jobs_root(jobs_dir), name)
    return None if isinstance(found, str) else found


def backend_of(record: JobRecord) -> tuple[Backend, JobHandle]:
    """The backend that runs a recorded job, and the job's handle."""
    from ..backends import registry
    from ..backends.toolkit.folder_jobs import handle_of

    handle = handle_of(record)
    return registry.get(handle.backend), handle


def sagemaker_handle(name: str, region: str | None) -> tuple[Backend, JobHandle]:
    """A SageMaker job known only by its name (the backend's calls raise ClientError when SageMaker does not know
    it, AwsSetupError without region or credentials)."""
    from ..backends import registry
    from ..backends.api import JobHandle

    return registry.get("sagemaker"), JobHandle(backend="sagemaker", job_name=name, region=region)
