"""SMP v2's ``torch.sagemaker.distributed`` namespace."""
from . import checkpoint

__all__ = ["checkpoint"]
