"""``torch.sagemaker.nn.huggingface``: SMP's replacements for Hugging Face modules (see ``llama_flashattn``)."""
from . import llama_flashattn

__all__ = ["llama_flashattn"]
