"""``torch.sagemaker.nn``: SMP's attention modules (``attn``) and Hugging Face model pieces (``huggingface``)."""
from . import attn

__all__ = ["attn"]
