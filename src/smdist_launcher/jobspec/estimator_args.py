"""Estimator constructor arguments (SageMaker Python SDK v2 names), one strict model per framework.

The same models validate Python keyword arguments, the YAML job file (jobspec/job_file.py adds `framework`,
`inputs`, `job_name`) and the CLI. Cross-field rules live in jobspec/rules/.
"""
from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator

from ..contract.hyperparameters import HyperparameterEncoding
from .container_paths import normal_container_path
from .distribution import Distribution
from .frameworks import FRAMEWORKS as FRAMEWORKS, Framework as Framework  # defined here before; kept importable
from .resilience import Resilience
from .strict_model import SpecModel


class InstanceGroup(SpecModel):
    instance_group_name: str
    instance_type: str
    instance_count: int = Field(ge=1)


class Tag(SpecModel):
    Key: str = Field(min_length=1)
    Value: str


class MetricDefinition(SpecModel):
    Name: str = Field(min_length=1)
    Regex: str = Field(min_length=1)


class CompilerConfig(SpecModel):
    enabled: bool = True
    debug: bool = False


def _flag_or_mapping(value: Any) -> Any:
    if value is None or isinstance(value, (bool, dict)):
        return value
    raise ValueError(f"must be true, false or a mapping of settings, got {value!r}")


class EstimatorArgs(SpecModel):
    """Arguments every framework estimator takes."""

    # code
    entry_point: str | None = None          # required; checked by the rules so that other problems are still reported
    source_dir: str | None = None
    dependencies: list[str] | None = None
    # symbolic links in source_dir/dependencies that point outside them: refused unless True (then their content is
    # packed); links that stay inside are always kept as links (backends/toolkit/source_tree.py)
    follow_symlinks: bool = False
    git_config: dict[str, Any] | None = None
    # image
    framework_version: str | None = None
    py_version: str | None = None
    image_uri: str | None = None
    # resources
    role: str | None = None
    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1)
    instance_groups: list[InstanceGroup] | None = None
    volume_size: int | None = Field(default=None, ge=1)
    volume_kms_key: str | None = None
    keep_alive_period_in_seconds: int | None = Field(default=None, ge=0, le=3600)
    max_run: int | None = Field(default=None, ge=1, le=28 * 24 * 3600)
    max_wait: int | None = Field(default=None, ge=1, le=28 * 24 * 3600)
    use_spot_instances: bool = False
    # SageMaker's RetryStrategy: how many times the job may start (the SDK: "the number of times to move a job to
    # the STARTING status"); every backend honours it, with `resilience` saying which failures it is spent on
    max_retry_attempts: int | None = Field(default=None, ge=1, le=30)
    resilience: Resilience | None = None
    subnets: list[str] | None = None
    security_group_ids: list[str] | None = None
    enable_network_isolation: bool = False
    encrypt_inter_container_traffic: bool = False
    region: str | None = None
    # training
    hyperparameters: dict[str, Any] | None = None
    # how the hyperparameters reach the script: "v2" (SDK v2 and its training toolkit) or "v3" (SDK v3's container
    # drivers; ModelTrainer's jobs); plan/hyperparameters.py
    hyperparameter_encoding: HyperparameterEncoding = Field(default=HyperparameterEncoding.V2, strict=False)
    distribution: Distribution | None = None
    environment: dict[str, str] | None = None
    input_mode: Literal["File", "Pipe", "FastFile"] | None = None
    container_log_level: int | None = Field(default=None, ge=0, le=50)
    container_entry_point: list[str] | None = None
    container_arguments: list[str] | None = None
    compiler_config: CompilerConfig | None = None
    # naming and outputs
    base_job_name: str | None = None
    output_path: str | None = None
    output_kms_key: str | None = None
    code_location: str | None = None
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None
    disable_output_compression: bool | None = None
    model_uri: str | None = None
    model_channel_name: str | None = None
    # service features passed through to CreateTrainingJob
    tags: list[Tag] | None = None
    metric_definitions: list[MetricDefinition] | None = None
    enable_sagemaker_metrics: bool | None = None
    disable_profiler: bool | None = None
    profiler_config: dict[str, Any] | None = None
    debugger_hook_config: Any = None
    tensorboard_output_config: dict[str, Any] | None = None
    rules: list[Any] | None = None
    enable_remote_debug: bool | None = None
    enable_infra_check: bool | None = None
    enable_session_tag_chaining: bool | None = None
    training_repository_access_mode: Literal["Platform", "Vpc"] | None = None
    training_repository_credentials_provider_arn: str | None = None
    # accepted for compatibility, never serialized
    sagemaker_session: Any = Field(default=None, exclude=True)

    # folder that relative source_dir / entry_point / dependencies are read from (job file folder or cwd)
    _base_dir: str = PrivateAttr(default_factory=os.getcwd)

    @field_validator("environment", mode="before")
    @classmethod
    def _numbers_as_strings(cls, value: Any) -> Any:
        # YAML turns `PORT: 80` into an int; environment values are strings, so numbers are taken as written.
        if isinstance(value, dict):
            return {k: (str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                    for k, v in value.items()}
        return value

    @field_validator("checkpoint_local_path")
    @classmethod
    def _normal_checkpoint_path(cls, value: str | None) -> str | None:
        return normal_container_path(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_mapping(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return [{"Key": k, "Value": v} for k, v in value.items()]
        return value

    @field_validator("debugger_hook_config")
    @classmethod
    def _debugger(cls, value: Any) -> Any:
        return _flag_or_mapping(value)

    # ---- paths on this machine ---------------------------------------------------------------------
    @property
    def base_dir(self) -> str:
        return self._base_dir

    def with_base_dir(self, base_dir: str) -> EstimatorArgs:
        self._base_dir = os.path.abspath(base_dir)
        return self

    @property
    def source_dir_path(self) -> str | None:
        """Absolute local path of source_dir (None for none or s3://)."""
        if not self.source_dir or self.source_dir.startswith("s3://"):
            return None
        return os.path.normpath(os.path.join(self._base_dir, self.source_dir))

    @property
    def entry_point_path(self) -> str | None:
        """Absolute local path of the entry point script."""
        if not self.entry_point:
            return None
        root = self.source_dir_path
        if self.source_dir and root is None:
            return None  # code lives in S3
        return os.path.normpath(os.path.join(root or self._base_dir, self.entry_point))

    @property
    def framework_name(self) -> str:
        return "framework"


class PyTorchArgs(EstimatorArgs):
    training_recipe: str | None = None
    recipe_overrides: dict[str, Any] | None = None

    @property
    def framework_name(self) -> str:
        return "pytorch"


class TensorFlowArgs(EstimatorArgs):
    model_dir: Any = None

    @field_validator("model_dir")
    @classmethod
    def _model_dir(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty; give a path/URI, or false for no model_dir argument")
        if value is None or value is False or isinstance(value, str):
            return value
        raise ValueError(f"must be a path/URI string or false (no model_dir argument), got {value!r}")

    @property
    def framework_name(self) -> str:
        return "tensorflow"


class HuggingFaceArgs(EstimatorArgs):
    transformers_version: str | None = None
    pytorch_version: str | None = None
    tensorflow_version: str | None = None

    @property
    def framework_name(self) -> str:
        return "huggingface"

    @property
    def base_framework(self) -> str:
        return "tensorflow" if self.tensorflow_version and not self.pytorch_version else "pytorch"


class MXNetArgs(EstimatorArgs):
    @property
    def framework_name(self) -> str:
        return "mxnet"


ARGS_MODELS: dict[str, type[EstimatorArgs]] = {
    "pytorch": PyTorchArgs,
    "tensorflow": TensorFlowArgs,
    "huggingface": HuggingFaceArgs,
    "mxnet": MXNetArgs,
    "framework": EstimatorArgs,
}


def args_model_for(framework: str) -> type[EstimatorArgs]:
    """The argument model of `framework` (KeyError for unknown names; validate_args reports those nicely)."""
    return ARGS_MODELS[framework]


def base_framework(args: EstimatorArgs) -> str:
    """pytorch/tensorflow for HuggingFace (by which version is given), else the framework itself."""
    if isinstance(args, HuggingFaceArgs):
        return args.base_framework
    return args.framework_name
