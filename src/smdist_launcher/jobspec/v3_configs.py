"""The configuration objects of SageMaker SDK v3's `ModelTrainer`, as our strict schemas (reference: sagemaker-v3.md).

One model per v3 class, with v3's field names: `SourceCode`, `Compute` (+ `InstanceGroup`), `InputData`
(+ `S3DataSource`), `StoppingCondition`, `OutputDataConfig`, `CheckpointConfig`, `RetryStrategy`, `Networking`,
`Tag`, `MetricDefinition`, and the distributed configs `Torchrun`, `MPI`, `SMP`. They are both the classes users
without `sagemaker` write (`smdist_launcher.train.configs` / `.distributed` re-export them) and the schema that v3's
own objects are checked against once read by shape (jobspec/v3_objects.py). Fields v3 has that we cannot honour
are not declared, so they are reported as unknown keys.

Constructing one directly raises our ValidationError (key paths relative to the object, prefixed by its class).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError as PydanticValidationError

from ..errors import ValidationError
from .error_items import from_pydantic
from .strict_model import SpecModel

# v3's default SourceCode.ignore_patterns; our archive has its own rule (docs/sagemaker.md), so only these are taken
V3_DEFAULT_IGNORE_PATTERNS = (".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints")


class V3Config(SpecModel):
    """Our v3 configs: built like v3's (keyword arguments), refused like ours (every problem, with key paths)."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            raise ValidationError(from_pydantic(exc, type(self), prefix=(type(self).__name__,))) from None

    # pydantic calls a model's own __init__ when validating nested data too (and would wrap our error there);
    # marked as the base __init__, it is called only when a user constructs one
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


class SourceCode(V3Config):
    source_dir: str | None = None
    entry_script: str | None = None
    command: str | None = None
    args: list[str] | None = None
    requirements: str | None = None
    ignore_patterns: list[str] | None = None


class InstanceGroup(V3Config):
    instance_group_name: str
    instance_type: str
    instance_count: int = Field(ge=1)


class Compute(V3Config):
    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1)
    volume_size_in_gb: int | None = Field(default=None, ge=1)
    volume_kms_key_id: str | None = None
    keep_alive_period_in_seconds: int | None = Field(default=None, ge=0, le=3600)
    instance_groups: list[InstanceGroup] | None = None
    enable_managed_spot_training: bool | None = None


class S3DataSource(V3Config):
    s3_uri: str
    s3_data_type: Literal["S3Prefix"] = "S3Prefix"
    s3_data_distribution_type: Literal["FullyReplicated", "ShardedByS3Key"] | None = None


class InputData(V3Config):
    channel_name: str = Field(min_length=1)
    data_source: str | S3DataSource
    content_type: str | None = None


class StoppingCondition(V3Config):
    max_runtime_in_seconds: int | None = Field(default=None, ge=1, le=28 * 24 * 3600)
    max_wait_time_in_seconds: int | None = Field(default=None, ge=1, le=28 * 24 * 3600)


class OutputDataConfig(V3Config):
    s3_output_path: str | None = None
    kms_key_id: str | None = None
    compression_type: Literal["GZIP", "NONE"] | None = None


class CheckpointConfig(V3Config):
    s3_uri: str
    local_path: str | None = None


class RetryStrategy(V3Config):
    maximum_retry_attempts: int = Field(ge=1, le=30)


class Networking(V3Config):
    subnets: list[str] | None = None
    security_group_ids: list[str] | None = None
    enable_network_isolation: bool | None = None
    enable_inter_container_traffic_encryption: bool | None = None


class Tag(V3Config):
    key: str = Field(min_length=1)
    value: str


class MetricDefinition(V3Config):
    name: str = Field(min_length=1)
    regex: str = Field(min_length=1)


class SMP(V3Config):
    """SMP v2's parameters (v3 sends the ones given as the `mp_parameters` hyperparameter)."""

    hybrid_shard_degree: int | None = Field(default=None, ge=0)
    sm_activation_offloading: bool | None = None
    activation_loading_horizon: int | None = Field(default=None, ge=1)
    fsdp_cache_flush_warnings: bool | None = None
    allow_empty_shards: bool | None = None
    tensor_parallel_degree: int | None = Field(default=None, ge=1)
    context_parallel_degree: int | None = Field(default=None, ge=1)
    expert_parallel_degree: int | None = Field(default=None, ge=1)
    random_seed: int | None = Field(default=None, ge=0)


def in_smp_order(parameters: dict[str, Any]) -> dict[str, Any]:
    """SMP parameters in the order v3 dumps an SMP's fields (declared order; others after, by name): v3's
    `mp_parameters` text."""
    order = list(SMP.model_fields)
    return dict(sorted(parameters.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order),
                                                           kv[0])))


class Torchrun(V3Config):
    # `type` tells a mapping's kind (v3's classes are told apart by class name, jobspec/v3_objects.py)
    type: Literal["torchrun"] = "torchrun"
    process_count_per_node: int | None = Field(default=None, ge=1)
    smp: SMP | None = None


class MPI(V3Config):
    type: Literal["mpi"] = "mpi"
    process_count_per_node: int | None = Field(default=None, ge=1)
    mpi_additional_options: list[str] | None = None


class Mode:
    """v3's training modes (sagemaker.train.model_trainer.Mode), as strings."""

    SAGEMAKER_TRAINING_JOB = "SAGEMAKER_TRAINING_JOB"
    LOCAL_CONTAINER = "LOCAL_CONTAINER"


class TrainerConfig(SpecModel):
    """Everything a ModelTrainer is given, read into plain data: the schema the v3 → v2 mapping starts from."""

    training_image: str | None = None
    algorithm_name: str | None = None
    role: str | None = None
    base_job_name: str | None = None
    source_code: SourceCode | None = None
    distributed: Torchrun | MPI | None = Field(default=None, discriminator="type")
    compute: Compute | None = None
    networking: Networking | None = None
    stopping_condition: StoppingCondition | None = None
    training_mode: Literal["SAGEMAKER_TRAINING_JOB", "LOCAL_CONTAINER"] | None = None
    output_data_config: OutputDataConfig | None = None
    input_data_config: list[InputData] | None = None
    checkpoint_config: CheckpointConfig | None = None
    training_input_mode: Literal["File", "Pipe", "FastFile"] | None = None
    environment: dict[str, str] | None = None
    hyperparameters: dict[str, Any] | None = None
    tags: list[Tag] | None = None
    # set by the builder methods
    retry_strategy: RetryStrategy | None = None
    metric_definitions: list[MetricDefinition] | None = None
    tensorboard_output_config: dict[str, Any] | None = None
    enable_remote_debug: bool | None = None
    enable_infra_check: bool | None = None
    enable_session_tag_chaining: bool | None = None
    # accepted for compatibility, never read
    sagemaker_session: Any = Field(default=None, exclude=True)
    local_container_root: Any = Field(default=None, exclude=True)


DISTRIBUTED_CLASSES: dict[str, type[V3Config]] = {"torchrun": Torchrun, "mpi": MPI}

__all__ = ["MPI", "SMP", "CheckpointConfig", "Compute", "InputData", "InstanceGroup", "MetricDefinition", "Mode",
           "Networking", "OutputDataConfig", "RetryStrategy", "S3DataSource", "SourceCode", "StoppingCondition", "Tag",
           "TrainerConfig", "Torchrun", "V3_DEFAULT_IGNORE_PATTERNS", "V3Config"]
