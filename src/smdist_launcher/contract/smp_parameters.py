"""Which SMP parameter keys exist, per API generation: the one list both sides of `mp_parameters` share.

The SDK's pydantic model (jobspec/smp_parameters.py) types and constrains these keys; the runtimes (smp/config.py for
v2, smp/v1/config.py for v1) parse them on the hosts. Stdlib only: the runtime imports this.
"""
from __future__ import annotations

# Keys meaningful to both SMP v1 (smdistributed.modelparallel.torch) and SMP v2 (torch.sagemaker).
SHARED_KEYS = frozenset({"tensor_parallel_degree", "activation_loading_horizon"})

V2_KEYS = frozenset({
    "hybrid_shard_degree", "context_parallel_degree", "expert_parallel_degree", "sm_activation_offloading",
    "fsdp_cache_flush_warnings", "allow_empty_shards", "random_seed",
})

V1_KEYS = frozenset({
    "partitions", "pipeline_parallel_degree", "microbatches", "pipeline", "placement_strategy", "optimize",
    "auto_partition", "default_partition", "contiguous", "horovod", "ddp", "ddp_port", "ddp_dist_backend",
    "memory_weight", "active_microbatches", "deterministic_server", "load_partition", "partition_file",
    "shard_optimizer_state", "prescaled_batch", "fp16", "fp16_params", "bf16", "offload_activations",
    "delayed_parameter_initialization", "skip_tracing", "fast_mode", "tensor_parallel_seed",
    "sharded_data_parallel_degree", "sdp_reduce_bucket_size", "sdp_param_persistence_threshold",
    "sdp_max_live_parameters", "sdp_hierarchical_allgather", "sdp_gradient_clipping", "predefined_hooks",
})

ALL_KEYS = SHARED_KEYS | V1_KEYS | V2_KEYS
