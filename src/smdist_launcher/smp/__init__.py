"""SMP v2 runtime (``import torch.sagemaker as tsm`` and its submodules resolve here).

Two flows: SMP's own (``tsm.init`` -> ``tsm.transform`` -> PyTorch ``FullyShardedDataParallel`` on SMP's groups,
``offload_wrapper`` with SMP's prefetching; see ``fsdp1`` and ``offload_wrapper_patch``), and this runtime's FSDP2
one (``shard_model``, ``apply_activation_checkpointing``/``apply_activation_offloading``).
Imports torch only (no pydantic/yaml/boto3): this runs inside training containers.
"""
from __future__ import annotations

from .activation_checkpoint import apply_activation_checkpointing
from .activation_offload import ActivationOffloader, apply_activation_offloading
from .config import SMPConfig
from .delayed_param import DelayedParamIniter, init_empty_weights, materialize
from .state import state
from .transform import init, is_initialized, shard_model, transform

__all__ = ["ActivationOffloader", "DelayedParamIniter", "SMPConfig", "apply_activation_checkpointing",
           "apply_activation_offloading", "init", "init_empty_weights", "is_initialized", "materialize",
           "shard_model", "state", "transform"]
