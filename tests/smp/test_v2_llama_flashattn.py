"""``torch.sagemaker.nn.huggingface.llama_flashattn.LlamaFlashAttention`` against a loop-by-loop reference of Llama
attention (rotary embeddings as complex rotations, grouped-query heads, causal softmax), on CPU, no transformers."""
from __future__ import annotations

import importlib
import importlib.metadata
import math
from types import SimpleNamespace

import pytest
import torch

from smdist_launcher.compat.aliases import install
from smdist_launcher.smp.nn.huggingface import llama_flashattn
from smdist_launcher.smp.nn.huggingface.llama_flashattn import LlamaFlashAttention


def _config(**overrides: object) -> SimpleNamespace:
    """The attributes a transformers LlamaConfig carries (read by attribute, as the module does)."""
    values = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rope_theta=10000.0, rope_scaling=None, attention_bias=False, attention_dropout=0.0, pretraining_tp=1)
    values.update(overrides)
    return SimpleNamespace(**values)


def _reference(attn: LlamaFlashAttention, x: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
               inv_freq: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and probabilities computed head by head. allowed[b, i, j]: query i may see key j."""
    b, s, _ = x.shape
    d, nh, nkv = attn.head_dim, attn.num_heads, attn.num_key_value_heads
    if inv_freq is None:
        inv_freq = torch.tensor([attn.rope_theta ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    q = (x @ attn.q_proj.weight.T).view(b, s, nh, d).double()
    k = (x @ attn.k_proj.weight.T).view(b, s, nkv, d).double()
    v = (x @ attn.v_proj.weight.T).view(b, s, nkv, d).double()

    def rotate(t: torch.Tensor) -> torch.Tensor:  # pairs (i, i + d/2) rotated by position * inv_freq[i]
        z = torch.complex(t[..., : d // 2], t[..., d // 2:])
        angle = positions.double()[:, :, None, None] * inv_freq[None, None, None, :]
        z = z * torch.polar(torch.ones_like(angle), angle)
        return torch.cat([z.real, z.imag], dim=-1)

    q, k = rotate(q), rotate(k)
    out = torch.zeros(b, s, nh, d, dtype=torch.float64)
    probs = torch.zeros(b, nh, s, s, dtype=torch.float64)
    for h in range(nh):
        kv = h // (nh // nkv)  # query head h reads key/value head h // group size
        scores = torch.einsum("bid,bjd->bij", q[:, :, h], k[:, :, kv]) / math.sqrt(d)
        scores = scores.masked_fill(~allowed, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        probs[:, h] = p
        out[:, :, h] = torch.einsum("bij,bjd->bid", p, v[:, :, kv])
    return (out.reshape(b, s, nh * d).float() @ attn.o_proj.weight.T), probs.float()


def _causal(b: int, s: int) -> torch.Tensor:
    return torch.ones(s, s, dtype=torch.bool).tril().expand(b, s, s)


@pytest.fixture()
def attn() -> LlamaFlashAttention:
    torch.manual_seed(0)
    return LlamaFlashAttention(_config(), layer_idx=0).eval()


def test_aws_import_path_gives_the_class() -> None:
    install()
    module = importlib.import_module("torch.sagemaker.nn.huggingface.llama_flashattn")
    assert module.LlamaFlashAttention is LlamaFlashAttention


def test_parameters_match_hugging_face_llama_attention() -> None:
    """AWS's scripts copy q/k/v/o_proj weights from the layer they replace; the state dict holds only those."""
    attn = LlamaFlashAttention(_config())
    shapes = {k: tuple(v.shape) for k, v in attn.state_dict().items()}
    assert shapes == {"q_proj.weight": (32, 32), "k_proj.weight": (16, 32), "v_proj.weight": (16, 32),
                      "o_proj.weight": (32, 32)}
    assert (attn.num_key_value_groups, attn.head_dim, attn.pretraining_tp) == (2, 8, 1)
    biased = LlamaFlashAttention(_config(attention_bias=True))
    assert {"q_proj.bias", "o_proj.bias"} <= set(biased.state_dict())


def test_causal_grouped_query_attention_matches_reference(attn: LlamaFlashAttention) -> None:
    x = torch.randn(2, 7, 32)
    positions = torch.arange(7)[None].expand(2, -1)
    out = attn(x)[0]
    ref, _ = _reference(attn, x, positions, _causal(2, 7))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    # explicit position_ids shift every rotation: same as the reference at those positions
    shifted = attn(x, position_ids=positions + 5)[0]
    torch.testing.assert_close(shifted, _reference(attn, x, positions + 5, _causal(2, 7))[0], atol=1e-5, rtol=1e-4)


def test_padding_mask_2d_and_additive_4d(attn: LlamaFlashAttention) -> None:
    x = torch.randn(2, 6, 32)
    pad = torch.ones(2, 6, dtype=torch.long)
    pad[1, :2] = 0  # left padding in the second sequence
    allowed = _causal(2, 6) & pad.bool()[:, None, :]
    positions = torch.arange(6)[None].expand(2, -1)
    ref, _ = _reference(attn, x, positions, allowed)
    out = attn(x, attention_mask=pad)[0]
    assert torch.isfinite(out).all()  # padded query rows see nothing: finite, ignored downstream
    torch.testing.assert_close(out[0], ref[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out[1, 2:], ref[1, 2:], atol=1e-5, rtol=1e-4)
    # Hugging Face's prepared 4-D additive mask (0 = attend, large negative = masked)
    additive = torch.zeros(2, 1, 6, 6).masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)
    out4 = attn(x, attention_mask=additive)[0]
    torch.testing.assert_close(out4[1, 2:], ref[1, 2:], atol=1e-5, rtol=1e-4)


def test_incremental_decoding_with_a_cache_equals_the_full_pass(attn: LlamaFlashAttention, monkeypatch) -> None:
    monkeypatch.setattr(llama_flashattn, "_returns_two", lambda: False)  # SMP's (output, weights, past) contract
    x = torch.randn(1, 5, 32)
    full = attn(x)[0]
    out, _, past = attn(x[:, :3], use_cache=True)
    steps = [out]
    for t in (3, 4):
        out, _, past = attn(x[:, t:t + 1], past_key_value=past, use_cache=True)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


def test_output_attentions_returns_the_probabilities(attn: LlamaFlashAttention) -> None:
    x = torch.randn(1, 4, 32)
    out, weights = attn(x, output_attentions=True)[:2]
    ref_out, ref_probs = _reference(attn, x, torch.arange(4)[None], _causal(1, 4))
    torch.testing.assert_close(weights, ref_probs, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-4)
    assert attn(x)[1] is None  # the fused kernel never forms them


def test_gradients_flow_to_every_projection(attn: LlamaFlashAttention) -> None:
    attn.train()
    attn(torch.randn(2, 5, 32))[0].square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attn.parameters())


def test_llama3_rope_scaling(monkeypatch) -> None:
    """Llama 3.1 scaling: long wavelengths slowed by `factor`, short ones untouched, a blend between."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32}
    torch.manual_seed(0)
    attn = LlamaFlashAttention(_config(rope_theta=500000.0, rope_scaling=scaling)).eval()
    d = attn.head_dim
    plain = torch.tensor([500000.0 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    wavelen = 2 * math.pi / plain
    expected = []
    for f, w in zip(plain.tolist(), wavelen.tolist(), strict=True):
        if w < 32 / 4.0:
            expected.append(f)
        elif w > 32 / 1.0:
            expected.append(f / 8.0)
        else:
            smooth = (32 / w - 1.0) / (4.0 - 1.0)
            expected.append((1 - smooth) * f / 8.0 + smooth * f)
    expected_t = torch.tensor(expected, dtype=torch.float64)
    torch.testing.assert_close(attn.rotary_emb.inv_freq.double(), expected_t, atol=1e-9, rtol=1e-5)
    x = torch.randn(1, 6, 32)
    ref, _ = _reference(attn, x, torch.arange(6)[None], _causal(1, 6), inv_freq=expected_t)
    torch.testing.assert_close(attn(x)[0], ref, atol=1e-5, rtol=1e-4)


def test_unknown_rope_scaling_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="yarn"):
        LlamaFlashAttention(_config(rope_scaling={"rope_type": "yarn", "factor": 4.0}))


def test_return_arity_follows_the_installed_transformers(monkeypatch, attn: LlamaFlashAttention) -> None:
    """transformers >= 4.48's decoder layer unpacks two values; older ones (and SMP) three."""
    def fake_version(name: str) -> str:
        if name != "transformers":
            raise importlib.metadata.PackageNotFoundError(name)
        return current

    monkeypatch.setattr(importlib.metadata, "version", fake_version)
    x = torch.randn(1, 3, 32)
    try:
        for version, arity in (("4.46.3", 3), ("4.48.0", 2), ("4.57.1", 2)):
            current = version  # what fake_version answers
            llama_flashattn._returns_two.cache_clear()
            assert len(attn(x)) == arity
    finally:
        llama_flashattn._returns_two.cache_clear()


class _GrowingCache:
    """The two methods of transformers' Cache the attention uses (update, get_seq_length), for one layer."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int,
               cache_kwargs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v


@pytest.mark.parametrize("keyword", ["past_key_value", "past_key_values", "cache"])
def test_cache_objects_under_each_transformers_keyword(attn: LlamaFlashAttention, keyword: str) -> None:
    """transformers passed the cache as past_key_value, then past_key_values, then cache (5.x)."""
    x = torch.randn(1, 5, 32)
    full = attn(x)[0]
    cache = _GrowingCache()
    steps = [attn(x[:, :2], **{keyword: cache}, use_cache=True)[0]]
    for t in (2, 3, 4):
        steps.append(attn(x[:, t:t + 1], **{keyword: cache}, use_cache=True)[0])
    assert cache.get_seq_length() == 5
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
