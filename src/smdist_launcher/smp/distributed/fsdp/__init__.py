"""``torch.sagemaker.distributed.fsdp``: checkpoint helpers for PyTorch FSDP models (``checkpoint``)."""
from . import checkpoint

__all__ = ["checkpoint"]
