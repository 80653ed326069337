"""SageMaker jobs in the jobs folder: `smdist submit` records each submission (backend "sagemaker"), so
`smdist jobs/status/stop/logs` find it beside local jobs; status comes from DescribeTrainingJob."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..toolkit.jobdir import JobDir
from ..toolkit.records import FINAL_STATUSES, JobRecord
from .attach import checked_clients
from .job import TrainingJob, _say

BACKEND = "sagemaker"


def record_submission(root: Path, job: TrainingJob, plan: Any) -> JobRecord:
    """A job.json for a submitted job (no hosts run here: the folder holds only the record)."""
    job_dir = JobDir.create(root, job.job_name)
    record = JobRecord(job_name=job.job_name, job_id=job.job_name, job_dir=str(job_dir.root), backend=BACKEND,
                       backend_info={"region": job.region, "arn": job.arn, "submit_directory": job.submit_directory},
                       plan=plan.model_dump(mode="json") if hasattr(plan, "model_dump") else dict(plan or {}))
    _apply(record, job.describe())
    record.save(job_dir.record_file)
    return record


def _apply(record: JobRecord, description: dict[str, Any]) -> None:
    record.status = description["TrainingJobStatus"]
    record.phase = description.get("SecondaryStatus") or record.phase
    record.failure_reason = description.get("FailureReason")
    record.model_data = (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if record.status in FINAL_STATUSES and record.ended is None:
        end = description.get("TrainingEndTime") or description.get("LastModifiedTime")
        record.ended = end.timestamp() if hasattr(end, "timestamp") else time.time()


def job_of(record: JobRecord, emit: Callable[[str], None] = _say) -> TrainingJob:
    return TrainingJob(checked_clients(record.backend_info["region"]), record.job_name,
                       arn=record.backend_info.get("arn"), submit_directory=record.backend_info.get("submit_directory"),
                       emit=emit)


def refresh(job_dir: Path) -> JobRecord:
    """The record, updated from DescribeTrainingJob (unchanged once final)."""
    path = JobDir(Path(job_dir)).record_file
    record = JobRecord.load(path)
    if record.status not in FINAL_STATUSES:
        _apply(record, job_of(record).describe())
        record.save(path)
    return record


def stop_job(job_dir: Path) -> None:
    job_of(JobRecord.load(JobDir(Path(job_dir)).record_file)).stop()


def follow_logs(job_dir: Path, follow: bool, emit: Callable[[str], None] = _say) -> None:
    job_of(JobRecord.load(JobDir(Path(job_dir)).record_file), emit=emit).logs(follow=follow)
