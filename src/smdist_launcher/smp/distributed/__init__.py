"""SMP v2's ``torch.sagemaker.distributed`` namespace (``checkpoint``, ``fsdp``)."""
from . import checkpoint, fsdp

__all__ = ["checkpoint", "fsdp"]
