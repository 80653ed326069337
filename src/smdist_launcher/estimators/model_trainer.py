"""`ModelTrainer`: SageMaker SDK v3's training class (sagemaker.train.model_trainer), on our spec, plan and backends.

The same constructor and `train()` as v3's, taking v3's config objects (read by shape, `sagemaker` never imported),
ours (`smdist_launcher.train.configs` / `.distributed`) or mappings. Unlike v3, every argument is checked at
construction by the estimators' rules (jobspec/v3_arguments.py maps v3 onto them), each problem named by its v3 key
path, before anything is uploaded. Inside it is a PyTorch estimator: `plan()`, `train(dry_run=True)` (the plan;
nothing uploaded, where v3's dry run uploads first), local instance types on our local backends, `ml.*` on SageMaker
in our image's request shape; `request(wire="v3")` shows what v3 itself would send.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError
from ..jobspec.catalog import is_local
from ..jobspec.error_items import item
from .job_names import v3_name_from_base
from .pytorch import PyTorch

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import DryRun
    from ..jobspec.estimator_args import EstimatorArgs
    from ..plan.model import LaunchPlan


class ModelTrainer:
    """v3's ModelTrainer arguments; see the module docstring. Bad input: one ValidationError, v3 key paths."""

    def __init__(self, training_image: str | None = None, role: str | None = None, base_job_name: str | None = None,
                 source_code: Any = None, distributed: Any = None, compute: Any = None, networking: Any = None,
                 stopping_condition: Any = None, algorithm_name: str | None = None, training_mode: Any = None,
                 output_data_config: Any = None, input_data_config: Any = None, checkpoint_config: Any = None,
                 training_input_mode: str | None = None, environment: dict[str, str] | None = None,
                 hyperparameters: dict[str, Any] | None = None, tags: Any = None, sagemaker_session: Any = None,
                 local_container_root: Any = None, **more: Any) -> None:
        arguments = {"training_image": training_image, "role": role, "base_job_name": base_job_name,
                     "source_code": source_code, "distributed": distributed, "compute": compute,
                     "networking": networking, "stopping_condition": stopping_condition,
                     "algorithm_name": algorithm_name, "training_mode": training_mode,
                     "output_data_config": output_data_config, "input_data_config": input_data_config,
                     "checkpoint_config": checkpoint_config, "training_input_mode": training_input_mode,
                     "environment": environment, "hyperparameters": hyperparameters, "tags": tags,
                     **more}  # unknown arguments are reported by name, with the rest
        self.sagemaker_session = sagemaker_session  # accepted for compatibility, never used
        self.local_container_root = local_container_root
        self._adopt({k: v for k, v in arguments.items() if v is not None})
        self.latest_training_job: Any = None

    def _adopt(self, arguments: dict[str, Any]) -> None:
        """Validate `arguments` and hold them, or raise and change nothing."""
        from ..jobspec.v3_arguments import validate_trainer
        from ..jobspec.validate import emit_warnings

        job = validate_trainer(arguments)
        emit_warnings(job.warnings)
        estimator = PyTorch.__new__(PyTorch)
        estimator._adopt(job.spec, job.spec.model_dump(exclude_unset=True), job_file=None)
        self._arguments, self._job, self._estimator = arguments, job, estimator

    def _with(self, key: str, value: Any) -> ModelTrainer:
        """The builder methods: one more argument, everything validated again."""
        self._adopt({**self._arguments, key: value})
        return self

    # ---- v3's builder methods ------------------------------------------------------------------------------
    def with_retry_strategy(self, retry_strategy: Any) -> ModelTrainer:
        return self._with("retry_strategy", retry_strategy)

    def with_checkpoint_config(self, checkpoint_config: Any = None) -> ModelTrainer:
        return self._with("checkpoint_config", checkpoint_config)

    def with_metric_definitions(self, metric_definitions: Any) -> ModelTrainer:
        return self._with("metric_definitions", metric_definitions)

    def with_tensorboard_output_config(self, tensorboard_output_config: Any = None) -> ModelTrainer:
        from ..jobspec.v3_objects import plain

        config = plain(tensorboard_output_config) if tensorboard_output_config is not None else {}
        if isinstance(config, dict):  # v3's shape names (s3_output_path, local_path) as the API's
            names = {"s3_output_path": "S3OutputPath", "local_path": "LocalPath"}
            config = {names.get(k, k): v for k, v in config.items()}
        return self._with("tensorboard_output_config", config)

    def with_infra_check_config(self, infra_check_config: Any = None) -> ModelTrainer:
        return self._with("enable_infra_check", _flag(infra_check_config, "enable_infra_check"))

    def with_remote_debug_config(self, remote_debug_config: Any = None) -> ModelTrainer:
        return self._with("enable_remote_debug", _flag(remote_debug_config, "enable_remote_debug"))

    def with_session_chaining_config(self, session_chaining_config: Any = None) -> ModelTrainer:
        return self._with("enable_session_tag_chaining", _flag(session_chaining_config, "enable_session_tag_chaining"))

    # ---- what it holds -----------------------------------------------------------------------------------------
    @property
    def spec(self) -> EstimatorArgs:
        """The validated arguments, as our estimators hold them (v2 names)."""
        return self._job.spec

    @property
    def estimator(self) -> PyTorch:
        """The PyTorch estimator the trainer runs (the same spec)."""
        return self._estimator

    @property
    def base_job_name(self) -> str:
        """v3's: as given (`_` kept; job names have `-` for it), else `<image repository>-job`."""
        from ..jobspec.v3_arguments import base_job_name

        return base_job_name(self._job.data)

    @property
    def hyperparameters(self) -> Any:
        """As given; a JSON or YAML file's path as the mapping it holds (v3 reads the file at construction)."""
        given = self._arguments.get("hyperparameters")
        return self._job.data.get("hyperparameters") if isinstance(given, str) else given

    def __getattr__(self, name: str) -> Any:
        # v3's attributes are its constructor's arguments: trainer.compute, trainer.distributed, ... as given
        if name in _ARGUMENTS:
            return self.__dict__.get("_arguments", {}).get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def _inputs(self, input_data_config: Any) -> dict[str, Any] | None:
        """train()'s input_data_config (else the constructor's) as the estimator's inputs."""
        if input_data_config is None:
            return self._job.inputs
        from ..jobspec.v3_arguments import input_channels

        inputs, errors = input_channels(input_data_config)
        if errors:
            raise ValidationError(errors)
        return inputs

    def _v3_paths(self, exc: ValidationError, input_data_config: Any) -> ValidationError:
        """The estimator's problems at the key paths v3 users wrote: `inputs.<name>` as
        `input_data_config[i].data_source`, `instance_type` as `compute.instance_type`, ..."""
        from ..jobspec.v3_arguments import v3_path

        inputs = self._inputs(input_data_config) or {}
        index = {name: i for i, name in enumerate(inputs)}
        out: list[ErrorItem] = []
        for problem in exc.errors:
            parts = problem.path.split(".")
            if parts[0] == "inputs" and len(parts) > 1 and parts[1] in index:
                path = f"input_data_config[{index[parts[1]]}].data_source"
            else:
                path = v3_path(problem.path)
            out.append(item(path, problem.message, problem.value))
        return ValidationError(out, source=exc.source)

    # ---- planning and running ------------------------------------------------------------------------------
    def plan(self, input_data_config: Any = None, job_name: str | None = None) -> LaunchPlan:
        """The launch plan. Pure: nothing is uploaded or started."""
        try:
            return self._estimator.plan(self._inputs(input_data_config), job_name=job_name)
        except ValidationError as exc:
            raise self._v3_paths(exc, input_data_config) from None

    def dryrun(self, input_data_config: Any = None, job_name: str | None = None, backend: str | None = None,
               **backend_options: Any) -> DryRun:
        """What `backend` would start or send (backends/api.py). Pure."""
        try:
            return self._estimator.dryrun(self._inputs(input_data_config), job_name=job_name, backend=backend,
                                          **backend_options)
        except ValidationError as exc:
            raise self._v3_paths(exc, input_data_config) from None

    def request(self, input_data_config: Any = None, job_name: str | None = None, region: str | None = None,
                wire: str = "smdist") -> dict[str, Any]:
        """The CreateTrainingJob request, secrets redacted, no AWS call. wire="smdist" (default): what train() sends
        on ml.* types (our image runs the shipped plan); wire="v3": what SageMaker SDK v3's train() would send."""
        if wire not in ("smdist", "v3"):
            raise ValidationError([item("wire", "must be 'smdist' (what train() sends) or 'v3' (what SageMaker SDK "
                                                "v3 sends)", wire)])
        try:
            if wire == "smdist":
                return self._estimator.request(self._inputs(input_data_config), job_name=job_name, region=region)
            from ..backends.sagemaker.request_v3 import render_v3_request

            plan = self._estimator.plan(self._inputs(input_data_config), job_name=job_name)
            return render_v3_request(self._estimator.submission(plan), region=region)
        except ValidationError as exc:
            raise self._v3_paths(exc, input_data_config) from None

    def train(self, input_data_config: Any = None, wait: bool = True, logs: bool = True, dry_run: bool = False,
              job_name: str | None = None, backend: str | None = None, **backend_options: Any) -> Any:
        """Run the job (v3's signature, plus ours: dry_run returns the plan and does nothing else, not even an
        upload; backend picks where a local job runs). Local instance types run on this machine, ml.* types as a
        SageMaker training job. Returns the job (also `latest_training_job`)."""
        inputs = self._inputs(input_data_config)
        if dry_run:
            return self.plan(input_data_config, job_name=job_name)
        job_name = job_name or v3_name_from_base(self.base_job_name)
        plan = self.plan(input_data_config, job_name=job_name)  # channel problems at v3 paths, before anything runs
        if is_local(plan.instance_type):
            try:
                self._estimator.channels(inputs, check_exists=True)
            except ValidationError as exc:
                raise self._v3_paths(exc, input_data_config) from None
        job = self._estimator.fit(inputs, wait=wait, logs=logs, job_name=job_name, backend=backend,
                                  **backend_options)
        self.latest_training_job = job
        return job

    def __repr__(self) -> str:
        s = self.spec
        return (f"ModelTrainer(training_image={s.image_uri!r}, entry_script={s.entry_point!r}, "
                f"instance_type={s.instance_type!r}, instance_count={s.instance_count!r}, "
                f"distribution={self._estimator.distribution!r})")


_ARGUMENTS = frozenset({
    "training_image", "role", "source_code", "distributed", "compute", "networking", "stopping_condition",
    "algorithm_name", "training_mode", "output_data_config", "input_data_config", "checkpoint_config",
    "training_input_mode", "environment", "tags", "retry_strategy", "metric_definitions",
    "tensorboard_output_config", "enable_remote_debug", "enable_infra_check", "enable_session_tag_chaining"})


def _flag(config: Any, name: str) -> Any:
    """v3's *Config objects carry one flag (InfraCheckConfig(enable_infra_check=True) ...); None means on."""
    if config is None:
        return True
    if isinstance(config, dict):
        return config.get(name, True)
    return getattr(config, name, True)
