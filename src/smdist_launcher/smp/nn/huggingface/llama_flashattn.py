"""``torch.sagemaker.nn.huggingface.llama_flashattn``: SMP's ``LlamaFlashAttention`` (for transformers < 4.34).

Not provided: transformers >= 4.37 has flash attention built in (``attn_implementation="flash_attention_2"``
or ``"sdpa"``), which is what SMP v2's scripts select on those versions."""
raise ImportError("torch.sagemaker.nn.huggingface.llama_flashattn (LlamaFlashAttention) is not implemented by "
                  "smdist-launcher; use transformers >= 4.37 with attn_implementation='sdpa' instead")
