"""The estimator: SageMaker's constructor arguments, validated at construction; plan() is pure, fit() runs it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ValidationError
from ..jobspec import job_file as job_files
from ..jobspec.catalog import is_local
from ..jobspec.error_items import item
from ..jobspec.inputs import normalize_inputs
from ..jobspec.resolve import default_job_name, resolve
from ..jobspec.rules.context import cluster_of
from ..jobspec.sdk_objects import plain_arguments
from ..jobspec.validate import validate_args
from .job_names import name_from_base

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import DryRun, Submission
    from ..jobspec.estimator_args import EstimatorArgs  # pydantic: annotations only, the import must stay fast
    from ..jobspec.resolved import ResolvedJob
    from ..plan.model import Channel, LaunchPlan

_REGISTRY: dict[str, type[FrameworkEstimator]] = {}


class FrameworkEstimator:
    """Base of PyTorch, TensorFlow, HuggingFace, MXNet and Framework. Subclasses only set `framework`."""

    framework: ClassVar[str] = "framework"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.framework] = cls

    def __init__(self, entry_point: str | None = None, **kwargs: Any) -> None:
        args = plain_arguments(kwargs)  # the SDK's InstanceGroup / TensorBoardOutputConfig objects, read by shape
        if entry_point is not None:
            args["entry_point"] = entry_point
        spec = validate_args(self.framework, args)
        self._adopt(spec, args, job_file=None)

    # ---- construction -------------------------------------------------------------------------------
    def _adopt(self, spec: EstimatorArgs, args: dict[str, Any], job_file: job_files.JobFile | None) -> None:
        self._spec = spec
        self._args = args
        self._job_file = job_file
        self.latest_job: Any = None
        self.model_data: str | None = None

    @classmethod
    def from_job_file(cls, path: str, *, overrides: dict[str, Any] | None = None) -> FrameworkEstimator:
        """The estimator a job file describes (PyTorch for `framework: pytorch`, ...).

        Called on a subclass, the file's framework must match it. Relative paths in the file are read from its folder.
        """
        job = job_files.load_job_file(path, overrides=overrides)
        target = _REGISTRY[job.framework]
        if cls is not FrameworkEstimator and cls.framework != job.framework:
            raise ValidationError([item("framework", f"{cls.__name__}.from_job_file needs framework: {cls.framework}; "
                                                     f"use estimator_from_job_file() for any framework",
                                        job.framework)],
                                  source=path)
        estimator = target.__new__(target)
        estimator._adopt(job.args, job.args.model_dump(exclude_unset=True), job_file=job)
        return estimator

    @classmethod
    def attach(cls, training_job_name: str, region: str | None = None, wait: bool = True, logs: Any = "None") -> Any:
        """The estimator of a SageMaker training job submitted earlier (or elsewhere), with latest_training_job set.
        Like the SDK, waits for the job unless wait=False (logs as in fit())."""
        from ..backends.sagemaker import attach_job, attached_arguments  # lazy: boto3

        job = attach_job(training_job_name, region=region)
        args = attached_arguments(job.describe())
        if region:
            args["region"] = region
        spec = validate_args(cls.framework, args, check_source=False)
        estimator = cls.__new__(cls)
        estimator._adopt(spec, args, job_file=None)
        estimator.latest_job = job
        if wait:
            job.wait(logs=logs)
        estimator.model_data = job.model_data
        return estimator

    @property
    def latest_training_job(self) -> Any:
        """The job the last fit() started (SageMaker: describe(), wait(logs=...), stop(), logs())."""
        return self.latest_job

    # ---- SageMaker-like attributes -----------------------------------------------------------------
    @property
    def spec(self) -> EstimatorArgs:
        """The validated arguments."""
        return self._spec

    @property
    def job_file(self) -> job_files.JobFile | None:
        return self._job_file

    def __getattr__(self, name: str) -> Any:
        # instance_count, instance_type, entry_point, source_dir, output_path, role, ... read from the validated spec
        spec = self.__dict__.get("_spec")
        if spec is not None and name in type(spec).model_fields:
            return getattr(spec, name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    @property
    def distribution(self) -> dict[str, Any]:
        """The distribution as validated (only the keys given; an SMP parameters file already read)."""
        dist = self._spec.distribution
        return dist.normalized() if dist is not None else {}

    @property
    def source_dir_path(self) -> str | None:
        """Absolute local path of source_dir (relative ones are read from the job file's folder or the working
        directory)."""
        return self._spec.source_dir_path

    @property
    def entry_point_path(self) -> str | None:
        return self._spec.entry_point_path

    @property
    def base_job_name(self) -> str:
        return default_job_name(self._spec, self.framework)

    def hyperparameters(self) -> dict[str, str]:
        """What SageMaker writes to hyperparameters.json: every value JSON-encoded, plus the launcher's sagemaker_*
        keys."""
        return dict(self.plan().sagemaker_hyperparameters)

    def set_hyperparameters(self, **hyperparameters: Any) -> None:
        """Add or replace hyperparameters; the arguments are validated again."""
        args = {**self._args, "hyperparameters": {**(self._spec.hyperparameters or {}), **hyperparameters}}
        spec = validate_args(self.framework, args, base_dir=self._spec.base_dir)
        self._adopt(spec, args, job_file=self._job_file)

    # ---- planning ----------------------------------------------------------------------------------
    def resolved(self, job_name: str | None = None) -> ResolvedJob:
        file_job_name = self._job_file.job_name if self._job_file is not None else None
        return resolve(self._spec, self.framework, job_name=job_name or file_job_name)

    def channels(self, inputs: Any = None, *, check_exists: bool = False) -> dict[str, Channel]:
        """check_exists: a local path that does not exist is a ValidationError (fit() in local mode)."""
        if inputs is None and self._job_file is not None:
            return dict(self._job_file.inputs)
        base_dir = self._job_file.base_dir if self._job_file is not None else None
        instance_type, _ = cluster_of(self._spec)
        return normalize_inputs(inputs, instance_type=instance_type, base_dir=base_dir, check_exists=check_exists)

    def plan(self, inputs: Any = None, job_name: str | None = None) -> LaunchPlan:
        """The launch plan. Pure: nothing is uploaded or started, no file is read."""
        from ..plan.planner import build_plan  # lazy: the planner is only needed here

        channels = self.channels(inputs)
        return build_plan(self.resolved(job_name), channels)

    def submission(self, plan: LaunchPlan) -> Submission:
        """What a backend gets to run `plan`: the plan, the code and the validated arguments (never the estimator)."""
        from .submission import build_submission

        return build_submission(self._spec, plan)

    def dryrun(self, inputs: Any = None, job_name: str | None = None, backend: str | None = None,
               **backend_options: Any) -> DryRun:
        """What `backend` would start or send for this job (backends/api.py). Pure: nothing is uploaded or started."""
        from ..backends import registry

        plan = self.plan(inputs, job_name=job_name)
        chosen = registry.for_job(backend, plan.instance_types)
        return chosen.dryrun(self.submission(plan), backend_options)

    def request(self, inputs: Any = None, job_name: str | None = None, region: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request fit() would send to SageMaker, secrets redacted. No AWS call.

        `<account>` (and `<region>` without region= or the estimator's region) stand for what only AWS knows.
        Raises ValidationError when the job cannot run on SageMaker (e.g. a local instance type or file:// inputs).
        """
        from ..backends import registry

        plan = self.plan(inputs, job_name=job_name)
        return registry.get("sagemaker").dryrun(self.submission(plan), {"region": region}).content

    # ---- running -----------------------------------------------------------------------------------
    def fit(
        self, inputs: Any = None, wait: bool = True, logs: Any = True, job_name: str | None = None,
        dry_run: bool = False, backend: str | None = None, jobs_root: str | None = None, **backend_options: Any,
    ) -> Any:
        """Run the job. dry_run=True returns the plan and does nothing else.

        Local instance types (local, local_cpu, local_gpu) run on this machine, ml.* types as an Amazon SageMaker
        training job; the result has model_data. `backend` picks another place to run (backends/registry.py:
        "process" by default for local types, "netns", "docker"; "slurm" for local and ml.* types alike, with
        `slurm={"partition": ..., "time": ...}` or those keys as keyword arguments); `backend_options` are that
        backend's options (its Options model)."""
        if dry_run:
            return self.plan(inputs, job_name=job_name)
        job_name = job_name or name_from_base(self.base_job_name)
        plan = self.plan(inputs, job_name=job_name)
        if is_local(plan.instance_type):
            self.channels(inputs, check_exists=True)  # a missing data folder: a ValidationError now, not a failed job
        from ..backends import registry  # lazy: the backends load only to run

        chosen = registry.for_job(backend, plan.instance_types)
        options = backend_options.pop(chosen.name, None) or {}  # fit(backend="slurm", slurm={...})
        dry = chosen.dryrun(self.submission(plan), {**options, **backend_options})
        result = chosen.submit(dry, wait=wait, logs=logs, jobs_root=jobs_root)
        self.latest_job = result
        self.model_data = getattr(result, "model_data", None)
        return result

    def __repr__(self) -> str:
        s = self._spec
        return (f"{type(self).__name__}(entry_point={s.entry_point!r}, instance_type={s.instance_type!r}, "
                f"instance_count={s.instance_count!r}, distribution={self.distribution!r})")


def estimator_from_job_file(path: str, *, overrides: dict[str, Any] | None = None) -> FrameworkEstimator:
    """The estimator of the job file's framework."""
    return FrameworkEstimator.from_job_file(path, overrides=overrides)
