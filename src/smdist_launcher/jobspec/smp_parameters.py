"""SageMaker model parallelism (SMP) parameters: `distribution.smdistributed.modelparallel.parameters`.

One model holds the keys of SMP v1 (launched by mpirun) and SMP v2 (launched by torchrun) so that typos get a
did-you-mean against both; the rules then reject v1-only keys under v2 and vice versa.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..contract.smp_parameters import ALL_KEYS, SHARED_KEYS, V1_KEYS, V2_KEYS
from .strict_model import SpecModel

PLACEMENT_WORDS = ("spread", "cluster")
_PERMUTATIONS = {"DPT", "DTP", "PDT", "PTD", "TDP", "TPD"}


class SMPParameters(SpecModel):
    # ---- SMP v1 (smdistributed.modelparallel.torch; mpirun) ----
    partitions: int | None = Field(default=None, ge=1, description="alias of pipeline_parallel_degree")
    pipeline_parallel_degree: int | None = Field(default=None, ge=1)
    microbatches: int | None = Field(default=None, ge=1)
    pipeline: Literal["simple", "interleaved", "_only_forward"] | None = None
    placement_strategy: str | None = None
    optimize: Literal["speed", "memory"] | None = None
    auto_partition: bool | None = None
    default_partition: int | None = Field(default=None, ge=0)
    contiguous: bool | None = None
    horovod: bool | None = None
    ddp: bool | None = None
    ddp_port: int | None = None
    ddp_dist_backend: Literal["auto", "nccl", "gloo"] | None = None
    memory_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    active_microbatches: int | None = Field(default=None, ge=1)
    deterministic_server: bool | None = None
    load_partition: bool | None = None
    partition_file: str | None = None
    shard_optimizer_state: bool | None = None
    prescaled_batch: bool | None = None
    fp16: bool | None = None
    fp16_params: bool | None = None
    bf16: bool | None = None
    offload_activations: bool | None = None
    delayed_parameter_initialization: bool | None = None
    skip_tracing: bool | None = None
    fast_mode: bool | None = None
    tensor_parallel_seed: int | None = Field(default=None, ge=0)
    sharded_data_parallel_degree: int | None = Field(default=None, ge=1)
    sdp_reduce_bucket_size: int | None = Field(default=None, ge=1)
    sdp_param_persistence_threshold: int | None = Field(default=None, ge=0)
    sdp_max_live_parameters: int | None = Field(default=None, ge=1)
    sdp_hierarchical_allgather: bool | None = None
    sdp_gradient_clipping: float | None = Field(default=None, ge=0.0)
    predefined_hooks: bool | None = None
    # ---- both ----
    tensor_parallel_degree: int | None = Field(default=None, ge=1)
    activation_loading_horizon: int | None = Field(default=None, ge=1)
    # ---- SMP v2 (torch.sagemaker; torchrun) ----
    hybrid_shard_degree: int | None = Field(default=None, ge=0)
    context_parallel_degree: int | None = Field(default=None, ge=1)
    expert_parallel_degree: int | None = Field(default=None, ge=1)
    sm_activation_offloading: bool | None = None
    fsdp_cache_flush_warnings: bool | None = None
    allow_empty_shards: bool | None = None
    random_seed: int | None = Field(default=None, ge=0)

    @field_validator("placement_strategy")
    @classmethod
    def _placement(cls, value: str | None) -> str | None:
        if value is None or value in PLACEMENT_WORDS or value in _PERMUTATIONS:
            return value
        raise ValueError(
            f"must be 'spread', 'cluster' or an ordering of the letters D, P, T such as 'DPT' or 'TPD', got {value!r}"
        )

    @field_validator("ddp_port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 65535:
            raise ValueError(f"must be a TCP port between 1 and 65535, got {value}")
        return value


# The key sets live in the contract (the runtime reads the same list); tests check the model covers exactly them.
__all__ = ["ALL_KEYS", "PLACEMENT_WORDS", "SHARED_KEYS", "SMPParameters", "V1_KEYS", "V2_KEYS"]
