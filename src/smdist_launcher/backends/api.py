"""The one interface every backend implements (TorchX's scheduler shape): dry run → submit → describe / stop / logs.

    backend = registry.get("process")
    dry = backend.dryrun(submission, options)      # pure: what would be started or sent, printable and pinnable
    job = backend.submit(dry, wait=False)          # side effects start here; job.handle finds it again later
    backend.describe(job.handle)                   # JobStatus: a JobState, the reason, per-host detail
    backend.stop(job.handle); backend.logs(job.handle, host="algo-2", follow=True)

A backend sees a `Submission` (the plan plus what staging and SageMaker need, built once by the estimator), never the
estimator. Job states are one enum for every backend; `is_terminal` is the one definition of "ended"."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..jobspec.estimator_args import EstimatorArgs
from ..jobspec.resilience import Resilience
from ..plan.model import Channel, LaunchPlan
from .fault_spec import Fault
from .states import (
    TERMINAL_STATES as TERMINAL_STATES,  # re-exported: the one definition is states.py
    JobState as JobState,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Code(_Frozen):
    """The code a job runs: the local folder (or lone entry point) to copy into each host or pack for SageMaker,
    None for an s3:// source_dir (used as it is), and the dependencies, each under its base name."""

    source: Path | None = None
    entry_point: Path | None = None        # absolute, for the SageMaker archive of a lone entry point
    dependencies: tuple[Path, ...] = ()
    follow_symlinks: bool = False
    base_dir: str = "."                    # what relative paths in the job (checkpoint folder, model_uri) are read from


class RunPolicy(_Frozen):
    """How every backend runs the job's attempts and reads its lines, built once: from the validated arguments when the
    submission is made (`of`), completed with the backend's options by its dry run (`with_options`: run-as, faults).
    No backend reads the arguments or its options through getattr for these."""

    max_run: int | None = None             # seconds; None: SageMaker's default (DEFAULT_MAX_RUN)
    max_retry_attempts: int | None = None  # SageMaker's MaximumRetryAttempts: how many times the job may start
    use_spot_instances: bool = False       # a preemption is retried only then
    resilience: Resilience = Field(default_factory=Resilience)
    metric_definitions: tuple[dict[str, str], ...] = ()   # SageMaker's ({Name, Regex}), applied to the ranks' lines
    disable_output_compression: bool = False  # model and output delivered as folders, not .tar.gz
    run_as: str | None = None              # the user every host runs as (process backend, root only)
    faults: tuple[Fault, ...] = ()         # `--inject`, checked against the job's hosts and ranks, in firing order

    @classmethod
    def of(cls, settings: EstimatorArgs | None) -> RunPolicy:
        """From the validated arguments; None: one attempt, no monitoring. (serve builds a container-command
        request's policy itself: serve/container_jobs.py.)"""
        if settings is None:
            return cls()
        return cls(max_run=settings.max_run, max_retry_attempts=settings.max_retry_attempts,
                   use_spot_instances=settings.use_spot_instances,
                   resilience=settings.resilience or Resilience(),
                   metric_definitions=tuple(d.model_dump() for d in settings.metric_definitions or []),
                   disable_output_compression=bool(settings.disable_output_compression))

    def with_options(self, *, run_as: str | None = None, faults: list[Fault] | tuple[Fault, ...] = ()) -> RunPolicy:
        """Completed by a backend's dry run from its options."""
        return self.model_copy(update={"run_as": run_as, "faults": tuple(faults)})


class Submission(_Frozen):
    """Everything a backend needs, built once by the estimator from the plan: no backend reads the estimator."""

    plan: LaunchPlan
    code: Code = Field(default_factory=Code)
    # SageMaker hands model_uri to the job as one more File channel; plans keep it out (pinned plans do not change).
    model_channel: tuple[str, Channel] | None = None
    # The validated arguments: what only the SageMaker request needs (role, tags, VPC, ...). None for a bare plan or
    # a container-command request (serve gives its policy).
    settings: EstimatorArgs | None = None
    # What every backend follows (max_run, retries, monitoring, metrics, run-as, faults): derived from the settings
    # when not given.
    policy: RunPolicy = Field(default_factory=RunPolicy)

    @model_validator(mode="before")
    @classmethod
    def _policy_from_settings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        settings = data.get("settings")
        if data.get("policy") is None:
            policy = RunPolicy.of(settings)
            plan = data.get("plan")
            if policy.max_run is None and isinstance(plan, LaunchPlan) and plan.max_run:
                policy = policy.model_copy(update={"max_run": plan.max_run})
            data = {**data, "policy": policy}
        return data

    @property
    def job_name(self) -> str:
        return self.plan.job_name

    @property
    def metric_definitions(self) -> list[dict[str, str]]:
        """SageMaker's metric_definitions ({Name, Regex}), for every backend to apply to the ranks' output."""
        return [dict(d) for d in self.policy.metric_definitions]

    @property
    def step_patterns(self) -> list[str]:
        """The resilience.log_monitoring patterns: the ones that capture a step give the status line a step rate."""
        return [m.pattern for m in self.policy.resilience.log_monitoring]

    def args(self) -> EstimatorArgs:
        if not isinstance(self.settings, EstimatorArgs):
            raise ValueError(f"job {self.job_name}: this backend needs the job's arguments (build the submission "
                             "with estimator.submission())")
        return self.settings


class DryRun(_Frozen):
    """What a backend would start or send for a submission: pure, printable (`render`) and pinnable (`smdist plan
    --dryrun --backend NAME --check FILE`). `submit` takes exactly this."""

    backend: str
    submission: Submission
    options: Any = None                    # the backend's own options model, validated
    what: str                              # one line: what the content is ("sbatch script", "CreateTrainingJob ...")
    content: Any                           # str (a script) or a JSON-like dict
    syntax: str = "yaml"                   # how to show a str content (bash, yaml, json)

    def render(self, fmt: str | None = None) -> str:
        if isinstance(self.content, str):
            return self.content
        if (fmt or self.syntax) == "json":
            return json.dumps(self.content, indent=2, ensure_ascii=False) + "\n"
        import yaml  # lazy: keeps `import smdist_launcher` light

        return str(yaml.safe_dump(self.content, sort_keys=False, allow_unicode=True, width=120))


class JobHandle(_Frozen):
    """How to find a job again from any process: `<backend>://<where>/<job name>` (TorchX's app handle)."""

    backend: str
    job_name: str
    job_dir: str | None = None             # the job's folder in a jobs folder (every backend but a bare SageMaker job)
    region: str | None = None              # SageMaker

    def __str__(self) -> str:
        where = self.job_dir.rsplit("/", 1)[0] if self.job_dir else (self.region or "")
        return f"{self.backend}://{where}/{self.job_name}"


class HostStatus(_Frozen):
    name: str
    exit_code: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)   # address, container, namespace, Slurm node, ...


class JobStatus(_Frozen):
    """describe(): the same shape from every backend."""

    job_name: str
    backend: str
    state: JobState
    phase: str | None = None               # staging, running, uploading, ... (SageMaker: its secondary status)
    reason: str | None = None              # why it failed or stopped
    model_data: str | None = None
    created: float | None = None
    ended: float | None = None
    hosts: list[HostStatus] = Field(default_factory=list)
    # every attempt of a job that was retried: number, cause, reason, the restart policy's decision, where it resumed
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    # ranks whose step falls far behind the furthest rank's, per stepped log monitor (the last check's)
    stragglers: dict[str, list[int]] = Field(default_factory=dict)

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    def summary(self) -> dict[str, Any]:
        """The fields `smdist status --json` prints."""
        return {"name": self.job_name, "backend": self.backend, "status": self.state.value, "phase": self.phase,
                "failure_reason": self.reason, "model_data": self.model_data, "attempts": self.attempts,
                "stragglers": self.stragglers}


Emit = Callable[[str], None]


@runtime_checkable
class Job(Protocol):
    """What submit() returns, whatever the backend: SageMaker's `estimator.latest_job`, in spirit."""

    job_name: str
    handle: JobHandle

    @property
    def status(self) -> str:
        """A JobState value."""
        ...

    @property
    def model_data(self) -> str | None: ...

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        """Block until the job ends; JobFailedError unless it completed (a backend may take more: SageMaker's
        logs=, Slurm's timeout=)."""
        ...

    def stop(self, *args: Any, **kwargs: Any) -> Any: ...

    def describe(self) -> dict[str, Any]: ...


@runtime_checkable
class Backend(Protocol):
    """A place jobs run. One module implements it; one line in backends/registry.py makes it choosable."""

    name: ClassVar[str]
    description: ClassVar[str]
    # The backend's options (`fit(backend=NAME, **options)`, its CLI flags); a pydantic model, validated in dryrun.
    Options: ClassVar[type[BaseModel]]
    # Instance types it runs: "local" (local, local_cpu, local_gpu), "ml" (ml.*: real machines), or both.
    runs: ClassVar[frozenset[str]]

    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun: ...

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> Job:
        """Start what the dry run describes. Returns the backend's job object (wait(), stop(), describe(),
        model_data, job_name, handle); with wait=True blocks and raises JobFailedError unless it completed."""
        ...

    def describe(self, handle: JobHandle) -> JobStatus: ...

    def stop(self, handle: JobHandle) -> str:
        """Ask the job to stop; what was done, one line for the user."""
        ...

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        """Every host's output (or some hosts'); follow: until the job ends. Text goes to emit (default: stdout)."""
        ...


def validated_options(model: type[BaseModel], values: BaseModel | dict[str, Any] | None, prefix: str) -> BaseModel:
    """A backend's options, checked: bad keys and values are one ValidationError naming every key path."""
    if isinstance(values, model):
        return values
    from pydantic import ValidationError as PydanticError

    from ..errors import ErrorItem, ValidationError

    try:
        return model.model_validate(values.model_dump() if isinstance(values, BaseModel) else values or {})
    except PydanticError as exc:
        items = [ErrorItem(".".join([prefix, *(str(p) for p in e["loc"])]), e["msg"].removeprefix("Value error, "),
                           e.get("input")) for e in exc.errors()]
        raise ValidationError(items) from None
