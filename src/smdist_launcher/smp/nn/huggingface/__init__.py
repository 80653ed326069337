"""``torch.sagemaker.nn.huggingface``: SMP's replacements for Hugging Face modules (see ``llama_flashattn``)."""
