"""``smp.nn.huggingface.gpt2.translate_hf_state_dict_to_smdistributed`` / ``translate_state_dict_to_hf_gpt2`` (the
names AWS's GPT-2 SMP v1 example calls) translate into the layout the DistributedModel has, in one process."""
from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from smdist_launcher.smp.v1 import nn as smp_nn
from smdist_launcher.smp.v1.nn.huggingface import gpt2
from smdist_launcher.smp.v1.state import state

SEQ = 6


@pytest.fixture(autouse=True)
def own_state() -> Iterator[None]:
    saved = dict(state.__dict__)
    yield
    state.__dict__.update(saved)


def smp_lm() -> smp_nn.DistributedTransformerLMHead:
    torch.manual_seed(0)
    return smp_nn.DistributedTransformerLMHead(
        num_layers=2, num_attention_heads=2, attention_head_size=4, hidden_size=8, intermediate_size=16,
        vocab_size=11, num_positions=SEQ, causal_mask_size=SEQ, attention_dropout_prob=0.0, hidden_dropout_prob=0.0,
        pre_layernorm=True, post_layernorm=True)


class HFLayout(nn.Module):
    """GPT2LMHeadModel's key layout, with the causal-mask buffer older transformers versions persist."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(11, 8)
        self.transformer.h = nn.ModuleList([nn.Module()])
        self.transformer.h[0].attn = nn.Module()
        self.transformer.h[0].attn.c_attn = nn.Linear(8, 24)
        self.transformer.h[0].attn.register_buffer("bias", torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool).tril())
        self.lm_head = nn.Linear(8, 11, bias=False)


def test_without_a_model_it_is_the_smdistributed_gpt2_translation() -> None:
    state.model = None
    hf = gpt2.translate_state_dict_to_hf_gpt2(smp_lm().state_dict(), SEQ)
    out = gpt2.translate_hf_state_dict_to_smdistributed(hf, SEQ)
    expected = gpt2.translate_hf_state_dict_to_smdistributed_gpt2(hf)
    assert set(out) == set(expected) and all(torch.equal(out[k], expected[k]) for k in out)


def test_a_distributed_transformer_lm_head_model_gets_smp_keys() -> None:
    model = smp_lm()
    state.model = SimpleNamespace(module=model)  # what translation reads of a DistributedModel: its module
    hf = gpt2.translate_state_dict_to_hf_gpt2(model.state_dict(), SEQ)
    out = gpt2.translate_hf_state_dict_to_smdistributed(hf, SEQ)
    assert set(out) == set(model.state_dict())
    model.load_state_dict(out)


def test_a_hugging_face_model_keeps_its_keys() -> None:
    """Here the model built under smp.tensor_parallelism() stays a Hugging Face model: keys are aligned, not
    translated (GPT2Model checkpoints gain "transformer.", mask buffers missing from the checkpoint come from the
    model)."""
    torch.manual_seed(0)
    model, source = HFLayout(), HFLayout()
    state.model = SimpleNamespace(module=model)
    checkpoint = {"module." + k[len("transformer."):]: v for k, v in source.state_dict().items()
                  if k.startswith("transformer.") and not k.endswith(".attn.bias")}
    checkpoint["lm_head.weight"] = source.lm_head.weight.detach()
    out = gpt2.translate_hf_state_dict_to_smdistributed(checkpoint, SEQ)
    assert set(out) == set(model.state_dict())
    model.load_state_dict(out)  # strict
    assert all(torch.equal(model.state_dict()[k], source.state_dict()[k]) for k in out)


def test_hugging_face_keys_back_to_hugging_face() -> None:
    sd = {"module." + k: v for k, v in HFLayout().state_dict().items() if not k.endswith(".attn.bias")}
    out = gpt2.translate_state_dict_to_hf_gpt2(sd, SEQ)
    assert out["transformer.h.0.attn.bias"].shape == (1, 1, SEQ, SEQ)
    assert out["transformer.h.0.attn.c_attn.weight"] is sd["module.transformer.h.0.attn.c_attn.weight"]  # untouched
    assert "lm_head.weight" in out and not any(k.startswith("module.") for k in out)
