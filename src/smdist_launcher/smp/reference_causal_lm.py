"""The reference GPT as a Hugging Face-style causal LM, for the tests and benchmarks that run without transformers.

``model(input_ids=..., labels=...)`` returns ``.loss`` / ``["loss"]`` and ``.logits`` as transformers' causal LMs
do (>= 4.46): the forward reaches its loss through a ``loss_function`` property, which is transformers'
``ForCausalLMLoss`` (5.17, copied: labels shifted by one with ``ignore_index`` padding, or ``shift_labels``;
float32; mean over the tokens not ignored, or sum / ``num_items_in_batch``). ``tied=True`` ties the LM head to the
embedding (GPT-2's way).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree

from .reference_models import GPT, GPTConfig


# transformers' names and code (loss_utils.py): tsm recognises the causal-LM loss by its name
def fixed_cross_entropy(source: torch.Tensor, target: torch.Tensor, num_items_in_batch: Any = None,
                        ignore_index: int = -100, **kwargs: Any) -> torch.Tensor:
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = F.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def ForCausalLMLoss(logits: torch.Tensor, labels: torch.Tensor, vocab_size: int,
                    num_items_in_batch: Any = None, ignore_index: int = -100,
                    shift_labels: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
    logits = logits.float()
    if shift_labels is None:
        labels = F.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1).to(logits.device)
    return fixed_cross_entropy(logits, shift_labels, num_items_in_batch, ignore_index, **kwargs)


class CausalLMOutput(OrderedDict):
    """``.loss`` / ``["loss"]``, ``.logits`` as transformers' ModelOutput (fields left None are absent; an
    OrderedDict, as FSDP's output hooks rebuild it)."""

    def __getattr__(self, name: str) -> Any:
        if name in ("loss", "logits"):
            return self.get(name)
        raise AttributeError(name)


# A pytree node, as transformers registers its ModelOutput: FSDP2 finds the tensors a module returned through
# pytree to hook its pre-backward on them. As a leaf, the root's hooks never saw the loss: its backward never
# started (no final callback), and on GPUs with data parallelism a block's freed weights were read in the next
# backward (2x2 H100, TP 2 x hybrid shard 2, FSDP2: "setStorage ... storage of size 0").
pytree.register_pytree_node(
    CausalLMOutput,
    lambda out: (list(out.values()), list(out.keys())),
    lambda values, keys: CausalLMOutput(zip(keys, values, strict=True)),
    serialized_type_name=f"{__name__}.CausalLMOutput",
)


class GPTForCausalLM(GPT):
    def __init__(self, cfg: GPTConfig, tied: bool = False) -> None:
        super().__init__(cfg)
        if tied:
            self.output.weight = self.tok_embeddings.weight

    @property
    def loss_function(self) -> Any:
        return self.__dict__.get("_loss_function", ForCausalLMLoss)

    @loss_function.setter
    def loss_function(self, value: Any) -> None:
        self.__dict__["_loss_function"] = value

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,  # type: ignore[override]
                logits_to_keep: int = 0, **kwargs: Any) -> CausalLMOutput:
        h = self.tok_embeddings(input_ids)
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        logits = self.output(h[:, -logits_to_keep:, :] if logits_to_keep else h)
        out = CausalLMOutput()
        if labels is not None:
            out["loss"] = self.loss_function(logits=logits, labels=labels, vocab_size=self.cfg.vocab_size, **kwargs)
        out["logits"] = logits
        return out
