"""Submit a LaunchPlan to Amazon SageMaker: check, upload the code archive, CreateTrainingJob, wait and stream logs.

Every check that needs no AWS call runs first, so bad input costs nothing (no upload, no job)."""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...jobspec.estimator_args import EstimatorArgs
from ...plan.model import LaunchPlan
from ..api import Submission
from ..toolkit.source_tree import SourceEntry
from . import preflight
from .aws import AwsClients, check_buckets, ensure_bucket, resolve_region
from .job import TrainingJob, _say
from .locations import SUBMIT_ARCHIVE, default_bucket, split_s3
from .request import LAUNCHER_ENV, JobTarget, build_request, plan_for_container, target_for
from .roles import resolve_role
from .status import SageMakerJob
from .upload import archive_members, upload_archive, write_archive


def _code_members(submission: Submission) -> list[SourceEntry] | None:
    """Files of the code archive; None when source_dir is already an s3:// archive (used as is, without the plan)."""
    plan, code = submission.plan, submission.code
    if plan.source_dir and plan.source_dir.startswith("s3://"):
        return None
    source_dir = str(code.source) if plan.source_dir is not None and code.source is not None else None
    if code.entry_point is None:
        raise ValueError(f"job {plan.job_name}: the submission names no entry point to pack")
    entry = str(code.entry_point)
    return archive_members(source_dir, entry, [str(d) for d in code.dependencies],
                           follow_symlinks=code.follow_symlinks)


def _prepare_buckets(clients: AwsClients, args: EstimatorArgs, target: JobTarget, default: str, *,
                     uploads: bool) -> None:
    """Create the default bucket when it is used; the user's buckets must exist (checked before anything is written)."""
    used = {"output_path": split_s3(target.output_path)[0]}
    if uploads:
        used["code_location" if args.code_location else "output_path"] = split_s3(target.submit_uri)[0]
    if default in used.values():
        ensure_bucket(clients.s3, default, clients.region)
    check_buckets(clients.s3, {name: bucket for name, bucket in used.items() if bucket != default})


def cluster_summary(plan: LaunchPlan) -> str:
    """'2 x ml.p4d.24xlarge', or per instance group 'data: 1 x ml.c5.18xlarge, train: 2 x ml.p4d.24xlarge'."""
    if plan.instance_groups:
        return ", ".join(f"{g.name}: {len(g.hosts)} x {g.instance_type}" for g in plan.instance_groups)
    return f"{plan.instance_count} x {plan.instance_type}"


def wait_for_job(clients: AwsClients, job_name: str, *, logs: bool = True, interval: float = 10.0,
                 emit: Callable[[str], None] = _say, submit_directory: str | None = None) -> SageMakerJob:
    """Poll DescribeTrainingJob until the job ends (streaming its logs); raise JobFailedError unless it completed."""
    job = TrainingJob(clients, job_name, submit_directory=submit_directory, emit=emit)
    job.wait(logs=logs, interval=interval)
    return job.snapshot()


def run_job(submission: Submission, *, wait: bool = True, logs: Any = True,
            poll_interval_s: float | None = None, emit: Callable[[str], None] = _say) -> TrainingJob:
    """Run the submission as a SageMaker training job. Returns the job (waited for unless wait=False: then
    job.wait(), job.describe(), job.stop(), job.logs())."""
    plan, args = submission.plan, submission.args()
    preflight.check(plan, args, reserved_env=len(LAUNCHER_ENV), region=args.region)
    region = resolve_region(args.region)
    if region != args.region:
        preflight.check(plan, args, reserved_env=len(LAUNCHER_ENV), region=region)  # images differ by region
    members = _code_members(submission)

    clients = AwsClients(region)
    account, partition = clients.caller()
    assert args.role is not None  # preflight.check() reports a missing role
    role = resolve_role(clients.client("iam"), args.role, account, partition)
    target = target_for(plan, args, region=region, account=account, partition=partition, role=role)
    request = build_request(plan, args, target)
    _prepare_buckets(clients, args, target, default_bucket(region, account), uploads=members is not None)
    if members is not None:
        with tempfile.TemporaryDirectory(prefix="smdist-code-") as tmp:
            archive = write_archive(Path(tmp, SUBMIT_ARCHIVE), members,
                                    plan_for_container(plan, request).to_json())  # redacted: secrets stay in the API
            upload_archive(clients.s3, archive, target.submit_uri)
        emit(f"[smdist] uploaded code to {target.submit_uri}")

    response = clients.sagemaker.create_training_job(**request)
    job = TrainingJob(clients, plan.job_name, arn=response.get("TrainingJobArn"), submit_directory=target.submit_uri,
                      emit=emit)
    emit(f"[smdist] created training job {plan.job_name} ({cluster_summary(plan)}): {job.console_url}")
    if wait:
        job.wait(logs=logs, interval=poll_interval_s)
    return job
