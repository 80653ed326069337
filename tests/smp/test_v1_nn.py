"""smp.nn modules and the Hugging Face translators, in one process (no tensor parallelism needed for the math)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from smdist_launcher.smp.v1 import nn as smp_nn, notices
from smdist_launcher.smp.v1.nn.huggingface import bert, gpt2, gptj
from smdist_launcher.smp.v1.state import state
from smdist_launcher.smp.v1.tensor_parallel import tensor_parallelism

SIZES = dict(num_attention_heads=2, attention_head_size=4, hidden_size=8, attention_dropout_prob=0.0,
             hidden_dropout_prob=0.0)


def lm(**kw) -> smp_nn.DistributedTransformerLMHead:
    torch.manual_seed(0)
    return smp_nn.DistributedTransformerLMHead(num_layers=2, intermediate_size=16, vocab_size=11, num_positions=6,
                                               causal_mask_size=6, pre_layernorm=True, post_layernorm=True,
                                               **SIZES, **kw)


def test_attention_layer_matches_a_plain_computation() -> None:
    torch.manual_seed(1)
    layer = smp_nn.DistributedAttentionLayer(**SIZES)  # post-LN (BERT's layout)
    x, mask = torch.randn(3, 5, 8), torch.zeros(3, 1, 1, 5)
    mask[0, ..., -1] = -10000.0
    q, k, v = (m(x).reshape(3, 5, 2, 4).transpose(1, 2) for m in (layer.query, layer.key, layer.value))
    probs = F.softmax(q @ k.transpose(-1, -2) / 2.0 + mask, dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(3, 5, 8)
    want = layer.layernorm(layer.dense(ctx) + x)
    assert torch.allclose(layer((x, mask)), want, atol=1e-6)


def test_transformer_layouts_and_cross_attention() -> None:
    gpt = smp_nn.DistributedTransformer(num_layers=2, intermediate_size=16, pre_layernorm=True, post_layernorm=True,
                                        **SIZES)
    assert gpt.layernorm is not None and gpt.seq_layers[0].attention.layernorm is None
    bert_like = smp_nn.DistributedTransformer(num_layers=1, intermediate_size=16, **SIZES)
    assert bert_like.layernorm is None and bert_like.seq_layers[0].attention.layernorm is not None
    dec = smp_nn.DistributedTransformerLayer(intermediate_size=16, add_cross_attention=True, **SIZES)
    out = dec((torch.randn(2, 3, 8), torch.randn(2, 4, 8), None, None))
    assert out[0].shape == (2, 3, 8) and len(out) == 4
    with pytest.raises(ValueError, match="at least one of pre_layernorm and post_layernorm"):
        smp_nn.DistributedAttentionLayer(pre_layernorm=False, post_layernorm=False)


def test_lm_head_is_causal_and_tied() -> None:
    model = lm()
    ids = torch.randint(0, 11, (2, 6))
    logits = model(ids)
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    assert torch.allclose(model(changed)[:, :-1], logits[:, :-1], atol=1e-6)  # the future does not leak
    loss, _ = model((ids, None, None, None, ids))
    assert torch.isclose(loss, F.cross_entropy(logits[:, :-1].reshape(-1, 11), ids[:, 1:].reshape(-1)))
    assert getattr(model.word_embedding, "_smp_tied", False) and id(model.position_embedding) in state.tp_marks


def test_gpt2_translation_round_trips() -> None:
    sd = lm().state_dict()
    hf = gpt2.translate_state_dict_to_hf_gpt2(sd, max_seq_len=6)
    assert hf["transformer.h.1.attn.c_attn.weight"].shape == (8, 24)
    assert hf["lm_head.weight"] is hf["transformer.wte.weight"]
    assert hf["transformer.h.0.attn.bias"].shape == (1, 1, 6, 6)
    back = gpt2.translate_hf_state_dict_to_smdistributed_gpt2({"module." + k: v for k, v in hf.items()})
    assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd)
    with pytest.raises(KeyError, match="not GPT-2's"):
        gpt2.translate_hf_state_dict_to_smdistributed_gpt2({"bert.pooler.dense.weight": torch.zeros(1)})


def test_unsupported_translators_refuse_with_a_reason() -> None:
    with pytest.raises(NotImplementedError, match="embedding LayerNorm"):
        bert.translate_hf_state_dict_to_smdistributed_bert({})
    with pytest.raises(NotImplementedError, match="rotary"):
        gptj.translate_state_dict_to_hf_gptj({}, max_seq_len=4)


def test_tensor_parallelism_keywords_override_or_warn_once() -> None:
    for key in ("tp-fused_softmax", "tp-not_a_thing"):
        notices._said.discard(key)
    with pytest.warns(UserWarning, match="fused_softmax=...\\) selects a fused CUDA kernel"):
        with tensor_parallelism(fused_softmax=False, attention_in_fp32=True):
            layer = smp_nn.DistributedAttentionLayer(**SIZES)
            linear = nn.Linear(4, 4)
    assert layer.attention_in_fp32 and id(linear) in state.tp_marks
    with pytest.warns(UserWarning, match="not_a_thing"):
        with tensor_parallelism(not_a_thing=1):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tensor_parallelism(fused_softmax=True):  # said once already: silent now
            pass


def test_flash_attention_layer_matches_sdpa() -> None:
    qkv = torch.randn(2, 5, 3, 2, 4)
    layer = smp_nn.FlashAttentionLayer(attention_dropout_prob=0.0, attention_head_size=4)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert torch.allclose(layer(qkv, causal=True), F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6)
