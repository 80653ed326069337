"""SMP v2 runtime (``import torch.sagemaker as tsm`` resolves here): FSDP2/DTensor under SMP's API.

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
