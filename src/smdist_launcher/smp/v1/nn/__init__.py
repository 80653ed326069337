"""``smp.nn`` (``smdistributed.modelparallel.torch.nn``): distributed modules and the Hugging Face translators."""
from . import huggingface
from .layers import (
                     DistributedAttentionLayer,
                     DistributedEmbedding,
                     DistributedLinear,
                     DistributedModule,
                     DistributedTransformer,
                     DistributedTransformerLayer,
                     DistributedTransformerLMHead,
                     DistributedTransformerOutputLayer,
                     FlashAttentionLayer,
                     FusedLayerNorm,
)

__all__ = ["DistributedAttentionLayer", "DistributedEmbedding", "DistributedLinear", "DistributedModule",
           "DistributedTransformer", "DistributedTransformerLMHead", "DistributedTransformerLayer",
           "DistributedTransformerOutputLayer", "FlashAttentionLayer", "FusedLayerNorm", "huggingface"]
