"""Translators for Hugging Face models that smp.nn here cannot represent: they refuse, saying why."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

WHY = {
    "bert": "BERT's embedding LayerNorm and pooler",
    "roberta": "RoBERTa's embedding LayerNorm, padding-offset positions and pooler",
    "gptj": "GPT-J's rotary position embeddings and parallel attention/MLP block",
    "gptneo": "GPT-Neo's local-attention layers and unscaled attention scores",
}


def refusing(model: str, name: str) -> Callable[..., Any]:
    def translate(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"smdistributed.modelparallel.torch.nn.huggingface.{model}.{name}: not supported by smdist-launcher: "
            f"smp.nn.DistributedTransformerLMHead has no equivalent of {WHY[model]}. Train the Hugging Face model "
            "itself under smp.DistributedModel (tensor parallelism applies to its nn.Linear layers) and load its "
            "state dict directly, or use GPT-2 (nn.huggingface.gpt2)")
    translate.__name__ = name
    return translate
