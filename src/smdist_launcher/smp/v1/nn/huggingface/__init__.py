"""State-dict translators between Hugging Face Transformers models and smp.nn.DistributedTransformerLMHead.

GPT-2 is implemented (gpt2.py). BERT, RoBERTa, GPT-J and GPT-Neo need layers our smp.nn does not have (embedding
LayerNorm, rotary embeddings, parallel attention/MLP, local attention), so their translators refuse with a message.
"""
from . import bert, gpt2, gptj, gptneo, roberta

__all__ = ["bert", "gpt2", "gptj", "gptneo", "roberta"]
