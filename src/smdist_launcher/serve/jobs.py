"""Training jobs of the endpoint: a CreateTrainingJob request becomes a local-mode job on this machine, run by the
backend serve was started with (process, netns or docker: backends.registry, through backends/api.py); its record
gives DescribeTrainingJob's status and secondary-status transitions."""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .container_jobs import (
    checked_container_plan,
    container_plan,
    container_submission,
    image_entrypoint_problem,
    is_container_command,
    placeholder_image_problem,
)
from .protocol import ApiError

# local job phase → SageMaker secondary status and its message
_SECONDARY = {
    "created": ("Starting", "Preparing the instances for training"),
    "staging": ("Downloading", "Downloading input data and the training code"),
    "starting": ("Training", "Starting the training processes on every host"),
    "running": ("Training", "Training image download completed. Training in progress."),
    "uploading": ("Uploading", "Uploading generated training model"),
}
_FINAL_SECONDARY = {"Completed": ("Completed", "Training job completed"), "Failed": ("Failed", "Training job failed"),
                    "Stopped": ("Stopped", "The job was stopped"),
                    "MaxRuntimeExceeded": ("MaxRuntimeExceeded", "The job reached its MaxRuntimeInSeconds"),
                    "Interrupted": ("Failed", "Training job failed: its launcher died before it ended")}


@dataclass
class Settings:
    jobs_dir: Path
    region: str = "us-east-1"
    account: str = "123456789012"
    processes_per_host: int | None = None   # None: the job's own (1 per simulated host on CPU)
    backend: str = "process"                # a backends.registry name, already checked (registry.choose)
    run_as: str | None = None               # the user every job's processes run as (process backend); None: ours


@dataclass
class ServedJob:
    request: dict[str, Any]
    created: float = field(default_factory=time.time)
    local: Any = None              # the backend's job (a backends.local.LocalJob) once started
    error: str | None = None       # why it could not start
    stopping: bool = False
    ended: float | None = None

    @property
    def name(self) -> str:
        return self.request["TrainingJobName"]


_GROUPS_HP = "sagemaker_distribution_instance_groups"   # the one group a heterogeneous job's distribution runs on
_SUBMIT_HP = "sagemaker_submit_directory"


def _decoded(value: str) -> Any:
    import json

    try:
        return json.loads(value)
    except ValueError:
        return value


def submit_directory(request: dict[str, Any]) -> str | None:
    """The request's s3:// code archive (sagemaker_submit_directory), if any."""
    value = _decoded(str((request.get("HyperParameters") or {}).get(_SUBMIT_HP, "null")))
    return value if isinstance(value, str) and value.startswith("s3://") else None


def estimator_for(request: dict[str, Any], settings: Settings,
                  code_dir: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """The local-mode estimator and fit() inputs a CreateTrainingJob request stands for: the same cluster shape
    (instance groups keep their names and counts) with every instance type "local"; the code from `code_dir` (the
    submit directory already unpacked) when given."""
    from ..backends.sagemaker.attach import attached_arguments
    from ..estimators import PyTorch, TensorFlow

    args = attached_arguments(request)
    if code_dir is not None:
        args["source_dir"] = str(code_dir)
    resources = request.get("ResourceConfig") or {}
    if resources.get("InstanceGroups"):
        args["instance_groups"] = [{**g, "instance_type": "local"} for g in args["instance_groups"]]
        groups = _decoded(str((request.get("HyperParameters") or {}).get(_GROUPS_HP, "null")))
        if args.get("distribution") and groups and not args["distribution"].get("instance_groups"):
            args["distribution"] = {**args["distribution"], "instance_groups": groups}
    else:
        args.update(instance_type="local", instance_count=int(resources.get("InstanceCount") or 1))
    if settings.processes_per_host and args.get("distribution"):
        mpi = dict(args["distribution"].get("mpi") or {})
        mpi["processes_per_host"] = settings.processes_per_host
        args["distribution"] = {**args["distribution"], "mpi": mpi}
    inputs = {c["ChannelName"]: {"uri": c["DataSource"]["S3DataSource"]["S3Uri"],
                                 "distribution": c["DataSource"]["S3DataSource"].get("S3DataDistributionType",
                                                                                     "FullyReplicated")}
              for c in request.get("InputDataConfig") or [] if "S3DataSource" in c.get("DataSource", {})}
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage", "")
    cls = TensorFlow if "tensorflow" in image else PyTorch
    return cls(**args), inputs


class Jobs:
    """Every job this endpoint was asked to run (in memory; each job's folder keeps its record and logs)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._jobs: dict[str, ServedJob] = {}
        self._lock = threading.Lock()
        # Each job's code, unpacked here until the job ends (its hosts get copies when it is staged).
        self._code_root = Path(tempfile.mkdtemp(prefix="smdist-serve-code-"))
        weakref.finalize(self, shutil.rmtree, str(self._code_root), True)

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.settings.region}:{self.settings.account}:training-job/{name}"

    def get(self, name: str) -> ServedJob:
        with self._lock:
            job = self._jobs.get(name)
        if job is None:
            raise ApiError("ValidationException", "Requested resource not found.")
        return job

    def all(self) -> list[ServedJob]:
        with self._lock:
            return list(self._jobs.values())

    def create(self, request: dict[str, Any]) -> dict[str, Any]:
        from ..errors import ValidationError

        name = request["TrainingJobName"]
        try:  # the request as sent (code still on S3): what is wrong with it is the caller's ValidationException
            problems = [p for p in (placeholder_image_problem(request), image_entrypoint_problem(request)) if p]
            if problems:
                raise ValidationError(problems)
            if is_container_command(request):
                checked_container_plan(request, self.settings)
            else:
                estimator, inputs = estimator_for(request, self.settings)
                estimator.plan(inputs, job_name=name)
        except ValidationError as exc:
            raise ApiError("ValidationException", str(exc)) from None
        with self._lock:
            if name in self._jobs:
                raise ApiError("ResourceInUse", f"Training job names must be unique within an AWS account and region, "
                                                f"and a training job with this name already exists ({self.arn(name)})")
            job = self._jobs[name] = ServedJob(request)
        threading.Thread(target=self._run, args=(job,), name=f"serve-{name}", daemon=True).start()
        return {"TrainingJobArn": self.arn(name)}

    def _run(self, job: ServedJob) -> None:
        """Fetch the code, start the job on the chosen backend, and drop the code once the job has ended."""
        from ..backends import registry
        from ..container.submit_directory import prepare_code

        code = self._code_root / job.name
        try:
            # Fetched here, not by each host: hosts with a network of their own (netns, docker) cannot reach an S3
            # server on this machine's loopback (moto, MinIO); local code is staged into every host like fit()'s.
            if is_container_command(job.request):  # its code comes as channels (v3: code, sm_drivers)
                submission = container_submission(container_plan(job.request), job.request)
            else:
                submit = submit_directory(job.request)
                if submit:
                    prepare_code(submit, code)
                estimator, inputs = estimator_for(job.request, self.settings, code if submit else None)
                submission = estimator.submission(estimator.plan(inputs, job_name=job.name))
            backend = registry.get(self.settings.backend)
            options = {"run_as": self.settings.run_as} if self.settings.run_as else {}
            dry = backend.dryrun(submission, options)
            job.local = backend.submit(dry, wait=False, logs=False, jobs_root=self.settings.jobs_dir)
        except Exception as exc:  # noqa: BLE001 - any failure to start is the job's FailureReason
            job.error = f"{type(exc).__name__}: {exc}"
            job.ended = time.time()
            shutil.rmtree(code, ignore_errors=True)
            return
        if job.stopping:  # StopTrainingJob came while the code was being fetched
            job.local.stop("stopped by StopTrainingJob")
        try:
            job.local.wait()
        except Exception:  # noqa: BLE001 - a failed or stopped job: its record says so, this only waits
            pass
        shutil.rmtree(code, ignore_errors=True)

    def stop_all(self, reason: str) -> None:
        """Stop every running job at once (serve is exiting): one after another, each could take its stack dumps'
        and grace period's time."""
        running = [j.local for j in self.all() if j.local is not None and j.local.record.status == "InProgress"]
        stoppers = [threading.Thread(target=local.stop, args=(reason,), daemon=True) for local in running]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()

    def stop(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        status = self.status(job)
        if status not in ("InProgress", "Stopping"):
            raise ApiError("ValidationException", f"The training job {name} is not in progress ({status}); "
                                                  "only InProgress jobs can be stopped")
        job.stopping = True
        if job.local is not None:
            threading.Thread(target=job.local.stop, args=("stopped by StopTrainingJob",), daemon=True).start()
        return {}

    # ---- DescribeTrainingJob ------------------------------------------------------------------------
    def status(self, job: ServedJob) -> str:
        if job.error is not None:
            return "Failed"
        if job.local is None:
            return "Stopping" if job.stopping else "InProgress"
        status = job.local.record.status
        if status == "InProgress":
            return "Stopping" if job.stopping else "InProgress"
        # SageMaker's TrainingJobStatus has neither: a job whose launcher died ended Failed (FailureReason says so)
        return {"MaxRuntimeExceeded": "Stopped", "Interrupted": "Failed"}.get(status, status)

    def _transitions(self, job: ServedJob) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"Status": "Starting", "StartTime": job.created,
                                      "StatusMessage": _SECONDARY["created"][1]}]
        record = job.local.record if job.local is not None else None
        for phase, (start, _end) in (record.phases.items() if record else []):
            secondary = _SECONDARY.get(phase)
            if secondary is None or secondary[0] == out[-1]["Status"]:
                continue
            out[-1]["EndTime"] = start
            out.append({"Status": secondary[0], "StartTime": start, "StatusMessage": secondary[1]})
        if job.stopping and self.status(job) == "Stopping":
            out[-1]["EndTime"] = time.time()
            out.append({"Status": "Stopping", "StartTime": time.time(), "StatusMessage": "Stopping the training job"})
        status = self.status(job)
        if status in ("Completed", "Failed", "Stopped"):
            final = record.status if record else "Failed"
            final_secondary, message = _FINAL_SECONDARY.get(final, _FINAL_SECONDARY[status])
            end = (record.ended if record and record.ended else job.ended) or time.time()
            out[-1].setdefault("EndTime", end)
            out.append({"Status": final_secondary, "StartTime": end, "EndTime": end, "StatusMessage": message})
        return out

    def describe(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        request = job.request
        status = self.status(job)
        transitions = self._transitions(job)
        record = job.local.record if job.local is not None else None
        out: dict[str, Any] = {
            "TrainingJobName": job.name, "TrainingJobArn": self.arn(job.name),
            "TrainingJobStatus": status, "SecondaryStatus": transitions[-1]["Status"],
            "SecondaryStatusTransitions": transitions,
            "AlgorithmSpecification": request.get("AlgorithmSpecification"), "RoleArn": request.get("RoleArn"),
            "HyperParameters": request.get("HyperParameters"), "InputDataConfig": request.get("InputDataConfig"),
            # SageMaker answers KmsKeyId "" when none was given (the SDK's attach reads it)
            "OutputDataConfig": {"KmsKeyId": "", **(request.get("OutputDataConfig") or {})},
            "ResourceConfig": request.get("ResourceConfig"),
            "StoppingCondition": request.get("StoppingCondition"), "Environment": request.get("Environment"),
            "RetryStrategy": request.get("RetryStrategy"), "CheckpointConfig": request.get("CheckpointConfig"),
            "EnableManagedSpotTraining": request.get("EnableManagedSpotTraining"),
            "CreationTime": job.created, "LastModifiedTime": time.time(), "TrainingStartTime": job.created,
        }
        if status in ("Completed", "Failed", "Stopped"):
            end = (record.ended if record and record.ended else job.ended) or time.time()
            out["TrainingEndTime"] = end
            out["BillableTimeInSeconds"] = max(1, int(end - job.created))
        reason = job.error or (record.failure_reason if record else None)
        if status == "Failed" and reason:
            diagnosis = getattr(job.local, "diagnosis", "") or ""
            text = f"AlgorithmError: {reason}" + (f"\n{diagnosis}" if diagnosis and diagnosis not in reason else "")
            out["FailureReason"] = text[-1024:] if len(text) > 1024 else text  # the API's limit
        model = getattr(job.local, "model_data", None) or (record.model_data if record else None)
        if status == "Completed" and model:
            out["ModelArtifacts"] = {"S3ModelArtifacts": model}
        return {k: v for k, v in out.items() if v is not None}

    def summaries(self, params: dict[str, Any]) -> dict[str, Any]:
        rows = []
        for job in sorted(self.all(), key=lambda j: j.created, reverse=params.get("SortOrder") != "Ascending"):
            status = self.status(job)
            if params.get("StatusEquals") and status != params["StatusEquals"]:
                continue
            if params.get("NameContains") and params["NameContains"] not in job.name:
                continue
            rows.append({"TrainingJobName": job.name, "TrainingJobArn": self.arn(job.name), "CreationTime": job.created,
                         "LastModifiedTime": time.time(), "TrainingJobStatus": status})
        return {"TrainingJobSummaries": rows[: int(params.get("MaxResults") or 100)]}

    def tags(self, params: dict[str, Any]) -> dict[str, Any]:
        """ListTags of a training job's ARN (the SDK's attach asks for them)."""
        name = params["ResourceArn"].rsplit("/", 1)[-1]
        return {"Tags": list(self.get(name).request.get("Tags") or [])}

    def log_file(self, name: str, host: str) -> Path | None:
        job = self._jobs.get(name)
        if job is None or job.local is None:
            return None
        return Path(job.local.job_dir) / "logs" / f"{host}.log"

    def hosts(self, name: str) -> list[str]:
        job = self._jobs.get(name)
        if job is None or job.local is None:
            return []
        return list(job.local.plan.host_names)
