"""Training jobs of the endpoint: a CreateTrainingJob request becomes a local-mode job on this machine, run by the
backend serve was started with (process, netns or docker: backends.registry, through backends/api.py); its record
gives DescribeTrainingJob's status and secondary-status transitions.

A request is checked whole at CreateTrainingJob (protocol.validate: the service model and serve's S3-only rule; then
the job-spec rules, for v2 and container-command requests alike) before any of its values names a file: the job's
name becomes its folders only after that. DescribeTrainingJob reads a snapshot of the job (_View), never the record
the job's thread is changing."""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.api import JobState
from ..backends.phases import Phase
from ..backends.secondary_status import OF_FINAL_STATE, OF_PHASE, SecondaryStatus
from ..errors import ErrorItem
from .container_jobs import (
    DRIVERS_CHANNEL,
    CheckedCommand,
    channel_problems,
    checked_container_plan,
    container_submission,
    image_entrypoint_problem,
    is_container_command,
    pinned_plan,
    placeholder_image_problem,
)
from .protocol import ApiError, offset_page, validate
from .request_keys import in_request_keys
from .settings import Settings

__all__ = ["Jobs", "ServedJob", "Settings", "estimator_for", "submit_directory"]

# local job phase → SageMaker secondary status and its message; the same for a final state
_ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.STOPPED)  # the TrainingJobStatus values of an ended job


@dataclass
class ServedJob:
    request: dict[str, Any]
    created: float = field(default_factory=time.time)
    local: Any = None              # the backend's job (a backends.local.LocalJob) once started
    error: str | None = None       # why it could not start
    stopping: bool = False
    ended: float | None = None
    command: CheckedCommand | None = None   # a container-command request: its checked plan, as create made it

    @property
    def name(self) -> str:
        return self.request["TrainingJobName"]


@dataclass(frozen=True)
class _View:
    """A job as one moment saw it: each live value (the job's thread sets them; its record's phases grow while it
    runs) read once, the phases copied in one step, so one answer is computed from one consistent state."""

    status: str                      # SageMaker's TrainingJobStatus
    record_status: str | None        # the local record's (it has MaxRuntimeExceeded, Interrupted)
    phases: tuple[tuple[str, float | None], ...]   # (phase, its start), in order
    ended: float | None
    stopping: bool
    reason: str | None
    diagnosis: str
    model_data: str | None


def _view(job: ServedJob) -> _View:
    local, error, stopping, ended = job.local, job.error, job.stopping, job.ended
    record = local.record if local is not None else None
    record_status = record.status if record is not None else None
    # dict(...) copies in one step (no Python code runs while it copies): iterating the live dict while the job
    # enters a phase raised "dictionary changed size during iteration", a 500 to DescribeTrainingJob
    phases = tuple((name, span[0]) for name, span in dict(record.phases).items()) if record is not None else ()
    if error is not None:
        status: str = JobState.FAILED
    elif record_status is None or record_status == JobState.IN_PROGRESS:
        status = JobState.STOPPING if stopping else JobState.IN_PROGRESS
    else:  # SageMaker's TrainingJobStatus has neither: a job whose launcher died ended Failed (its reason says so)
        status = {JobState.MAX_RUNTIME_EXCEEDED: JobState.STOPPED,
                  JobState.INTERRUPTED: JobState.FAILED}.get(JobState.of(record_status), JobState.of(record_status))
    return _View(status=status, record_status=record_status, phases=phases,
                 ended=(record.ended if record is not None and record.ended else None) or ended, stopping=stopping,
                 reason=error or (record.failure_reason if record is not None else None),
                 diagnosis=str(getattr(local, "diagnosis", "") or ""),
                 model_data=getattr(local, "model_data", None) or (record.model_data if record is not None else None))


_GROUPS_HP = "sagemaker_distribution_instance_groups"   # the one group a heterogeneous job's distribution runs on
_SUBMIT_HP = "sagemaker_submit_directory"


def _decoded(value: str) -> Any:
    import json

    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return value


def hyperparameter_json_problems(request: dict[str, Any]) -> list[ErrorItem]:
    """A v2 request's hyperparameters are JSON text, decoded as the SDK's attach does: a value nested deeper than
    Python's parser goes ('[' * 1250 + ']' * 1250 fits the model's 2500 characters) raised RecursionError, a 500."""
    import json

    problems = []
    for key, value in (request.get("HyperParameters") or {}).items():
        try:
            json.loads(str(value))
        except ValueError:
            pass   # not JSON: taken as the plain string it is
        except RecursionError:
            problems.append(ErrorItem(f"HyperParameters.{key}", "is JSON nested deeper than Python's parser goes: "
                                      "a hyperparameter is a value, a list or an object a few levels deep",
                                      value))
    return problems


def submit_directory(request: dict[str, Any]) -> str | None:
    """The request's s3:// code archive (sagemaker_submit_directory), if any."""
    value = _decoded(str((request.get("HyperParameters") or {}).get(_SUBMIT_HP, "null")))
    return value if isinstance(value, str) and value.startswith("s3://") else None


def v2_code_problems(request: dict[str, Any]) -> list[ErrorItem]:
    """A v2 request's code comes from S3 and its program is a path inside that archive: never a file or folder of
    this machine (a code path of serve's machine would be copied into the job, and handed to the job's user)."""
    import posixpath

    from ..jobspec.rules.arguments import s3_uri_problem

    hps = request.get("HyperParameters") or {}
    problems = []
    submit = _decoded(str(hps.get(_SUBMIT_HP, "null")))
    why = s3_uri_problem(submit) if isinstance(submit, str) else "is missing"
    if why:
        problems.append(ErrorItem(f"HyperParameters.{_SUBMIT_HP}", f"{why}: serve runs a v2 job's code from the "
                                  "s3:// URI of its archive (JSON-encoded, as the SDK sends it)",
                                  hps.get(_SUBMIT_HP)))
    program = _decoded(str(hps.get("sagemaker_program", "null")))
    if not isinstance(program, str) or not program.strip() or "\x00" in program or program.startswith("/") \
            or posixpath.normpath(program).split("/")[0] == "..":
        problems.append(ErrorItem("HyperParameters.sagemaker_program", "must be the script's path inside the code "
                                  "archive, relative to it (e.g. \"train.py\", JSON-encoded)",
                                  hps.get("sagemaker_program")))
    return problems


def metric_regex_problems(request: dict[str, Any]) -> list[ErrorItem]:
    """Each MetricDefinitions regex compiles, with Python's `re` (as SageMaker's SDK users write them) and with the
    `regex` package the job's log lines are searched with (metrics/definitions.py): a regex either cannot compile
    made an accepted job fail, or lose its metric, when it started."""
    import re

    from ..jobspec.error_items import show
    from ..metrics.definitions import compile_error

    problems = []
    for i, definition in enumerate((request.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []):
        regex = definition.get("Regex") if isinstance(definition, dict) else None
        try:
            re.compile(str(regex))
            error = compile_error(str(regex))
        except (re.error, RecursionError, OverflowError) as exc:
            error = str(exc)
        if error is not None:
            problems.append(ErrorItem(f"AlgorithmSpecification.MetricDefinitions[{i}].Regex",
                                      f"{show(regex)} is not a regular expression Python compiles ({error}): each "
                                      "log line is searched with it", regex))
    return problems


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

        # The whole request against the service model first (Endpoint did too; create is where names become paths,
        # so it never trusts a caller to have checked).
        validate("sagemaker", "CreateTrainingJob", request)
        name = request["TrainingJobName"]
        command = None
        try:  # the request as sent (code still on S3): what is wrong with it is the caller's ValidationException
            problems = [p for p in (placeholder_image_problem(request), image_entrypoint_problem(request)) if p]
            problems += metric_regex_problems(request)
            if problems:
                raise ValidationError(problems)
            if is_container_command(request):
                command = checked_container_plan(request, self.settings)
            else:
                problems = hyperparameter_json_problems(request) or v2_code_problems(request) \
                    or channel_problems(request)
                if problems:
                    raise ValidationError(problems)
                estimator, inputs = estimator_for(request, self.settings)
                estimator.plan(inputs, job_name=name)
        except ValidationError as exc:
            raise ApiError("ValidationException", str(in_request_keys(exc))) from None
        with self._lock:
            # a folder of that name is a job of an earlier serve (its record and logs): never reused
            if name in self._jobs or os.path.lexists(self.settings.jobs_dir / name):
                raise ApiError("ResourceInUse", f"Training job names must be unique within an AWS account and region, "
                                                f"and a training job with this name already exists ({self.arn(name)})")
            job = self._jobs[name] = ServedJob(request, command=command)
        threading.Thread(target=self._run, args=(job,), name=f"serve-{name}", daemon=True).start()
        return {"TrainingJobArn": self.arn(name)}

    def _run(self, job: ServedJob) -> None:
        """Fetch the code, start the job on the chosen backend, and drop the code once the job has ended."""
        from ..backends import registry
        from ..container.submit_directory import prepare_code

        try:
            code = self._code_dir(job.name)
        except ValueError as exc:  # never for a created job (its name passed at create): no folder is touched
            job.error, job.ended = str(exc), time.time()
            return
        try:
            # Fetched here, not by each host: hosts with a network of their own (netns, docker) cannot reach an S3
            # server on this machine's loopback (moto, MinIO); local code is staged into every host like fit()'s.
            if job.command is not None:  # its code comes as channels (v3: code, sm_drivers)
                plan = pinned_plan(job.command, code / DRIVERS_CHANNEL)
                submission = container_submission(plan, job.request)
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

    def _code_dir(self, name: str) -> Path:
        """The job's code folder below serve's own. The name passed the job-name rule at create; it is checked again
        where it becomes a path, so no caller's value ever names a folder elsewhere."""
        from ..jobspec.rules.arguments import job_name_problem

        problem = job_name_problem(name)
        if problem:
            raise ValueError(f"TrainingJobName {problem}")
        return self._code_root / name

    def stop_all(self, reason: str) -> None:
        """Stop every running job at once (serve is exiting): one after another, each could take its stack dumps'
        and grace period's time."""
        running = [j.local for j in self.all() if j.local is not None and j.local.record.status == JobState.IN_PROGRESS]
        stoppers = [threading.Thread(target=local.stop, args=(reason,), daemon=True) for local in running]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()

    def stop(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        status = self.status(job)
        if status not in (JobState.IN_PROGRESS, JobState.STOPPING):
            raise ApiError("ValidationException", f"The training job {name} is not in progress ({status}); "
                                                  "only InProgress jobs can be stopped")
        job.stopping = True
        if job.local is not None:
            threading.Thread(target=job.local.stop, args=("stopped by StopTrainingJob",), daemon=True).start()
        return {}

    # ---- DescribeTrainingJob ------------------------------------------------------------------------
    def status(self, job: ServedJob) -> str:
        return _view(job).status

    @staticmethod
    def _transitions(job: ServedJob, view: _View) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"Status": SecondaryStatus.STARTING, "StartTime": job.created,
                                      "StatusMessage": OF_PHASE[Phase.CREATED][1]}]
        for phase, start in view.phases:
            secondary = OF_PHASE.get(phase)
            if secondary is None or secondary[0] == out[-1]["Status"]:
                continue
            out[-1]["EndTime"] = start
            out.append({"Status": secondary[0], "StartTime": start, "StatusMessage": secondary[1]})
        now = time.time()
        if view.status == JobState.STOPPING:
            out[-1]["EndTime"] = now
            out.append({"Status": SecondaryStatus.STOPPING, "StartTime": now,
                        "StatusMessage": "Stopping the training job"})
        if view.status in _ENDED:
            final = view.record_status or JobState.FAILED
            final_secondary, message = OF_FINAL_STATE.get(final, OF_FINAL_STATE[view.status])
            end = view.ended or now
            out[-1].setdefault("EndTime", end)
            out.append({"Status": final_secondary, "StartTime": end, "EndTime": end, "StatusMessage": message})
        return out

    def describe(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        request = job.request
        view = _view(job)
        status = view.status
        transitions = self._transitions(job, view)
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
        if status in _ENDED:
            end = view.ended or time.time()
            out["TrainingEndTime"] = end
            out["BillableTimeInSeconds"] = max(1, int(end - job.created))
        reason, diagnosis = view.reason, view.diagnosis
        if status == JobState.FAILED and reason:
            text = f"AlgorithmError: {reason}" + (f"\n{diagnosis}" if diagnosis and diagnosis not in reason else "")
            out["FailureReason"] = text[-1024:] if len(text) > 1024 else text  # the API's limit
        if status == JobState.COMPLETED and view.model_data:
            out["ModelArtifacts"] = {"S3ModelArtifacts": view.model_data}
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
        # paged (none was given: a paginator stopped after the first MaxResults)
        token = params.get("NextToken")
        refused = ApiError("ValidationException", f"NextToken {str(token)[:80]!r} is not a token this endpoint gave "
                                                  "out (give the NextToken of the previous ListTrainingJobs answer)")
        page, following = offset_page(rows, token, int(params.get("MaxResults") or 100), refused)
        out: dict[str, Any] = {"TrainingJobSummaries": page}
        if following is not None:
            out["NextToken"] = following
        return out

    def tags(self, params: dict[str, Any]) -> dict[str, Any]:
        """ListTags of a training job's ARN (the SDK's attach asks for them)."""
        name = params["ResourceArn"].rsplit("/", 1)[-1]
        return {"Tags": list(self.get(name).request.get("Tags") or [])}

    def log_file(self, name: str, host: str) -> Path | None:
        """A host's log file; None for a host the job does not have (a name from a request is looked up, never
        joined into a path)."""
        job = self._jobs.get(name)
        if job is None or job.local is None or host not in job.local.plan.host_names:
            return None
        return Path(job.local.job_dir) / "logs" / f"{host}.log"

    def hosts(self, name: str) -> list[str]:
        job = self._jobs.get(name)
        if job is None or job.local is None:
            return []
        return list(job.local.plan.host_names)
