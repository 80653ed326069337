"""``torch.sagemaker.nn.huggingface.llama_flashattn``: SMP's ``LlamaFlashAttention``.

AWS's SMP v2 scripts swap every Hugging Face Llama layer's ``self_attn`` for it and copy the projections in::

    layer.self_attn = LlamaFlashAttention(model.config)
    layer.self_attn.pretraining_tp = model.config.pretraining_tp
    layer.self_attn.q_proj.weight.copy_(old.q_proj.weight)   # k_proj, v_proj, o_proj alike

Here it is Llama attention (rotary embeddings, grouped-query heads) over PyTorch's scaled_dot_product_attention,
which picks the flash / memory-efficient kernels on GPUs. It needs no ``transformers``: the config is read by
attribute. Its forward takes what every Hugging Face ``LlamaDecoderLayer`` passes (``position_ids`` or the
model's ``position_embeddings``, 2-D padding or 4-D masks, legacy ``(k, v)`` tuples or ``Cache`` objects).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# transformers >= 4.48's LlamaDecoderLayer unpacks (output, weights); earlier ones (and SMP's class) return
# (output, weights, past_key_value).
_TWO_TUPLE_FROM = (4, 48)


@functools.lru_cache(maxsize=1)
def _returns_two() -> bool:
    try:
        from importlib.metadata import PackageNotFoundError, version
        parts = version("transformers").split(".")
        return (int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)) >= _TWO_TUPLE_FROM
    except (PackageNotFoundError, ValueError, IndexError):
        return False  # no transformers: SMP's own contract


def _rope_inv_freq(config: Any, head_dim: int) -> torch.Tensor:
    """Rotary inverse frequencies for the config's ``rope_scaling`` (default, linear, dynamic, llama3; other types
    are refused rather than silently computed as default)."""
    base = float(getattr(config, "rope_theta", 10000.0))
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = getattr(config, "rope_scaling", None) or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", "dynamic"):  # dynamic: the base grows with the sequence (_RotaryEmbedding.forward)
        return inv_freq
    if kind == "linear":
        return inv_freq / float(scaling["factor"])
    if kind == "llama3":
        # Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a smooth blend in between.
        factor = float(scaling["factor"])
        low, high = float(scaling.get("low_freq_factor", 1.0)), float(scaling.get("high_freq_factor", 4.0))
        old_len = float(scaling.get("original_max_position_embeddings", 8192))
        wavelen = 2 * math.pi / inv_freq
        smooth = (old_len / wavelen - low) / (high - low)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        out = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        medium = (wavelen <= old_len / low) & (wavelen >= old_len / high)
        return torch.where(medium, blended, out)
    raise NotImplementedError(f"LlamaFlashAttention: rope_scaling type {kind!r} is not implemented by this runtime "
                              "(default, linear, dynamic and llama3 are); use transformers' own attention "
                              "(attn_implementation='sdpa') for this model")


class _RotaryEmbedding(nn.Module):
    """cos/sin tables for positions; ``inv_freq`` is a non-persistent buffer, so the state dict holds only the
    projections (the same keys as Hugging Face's LlamaAttention)."""

    inv_freq: torch.Tensor  # a buffer

    def __init__(self, config: Any, head_dim: int) -> None:
        super().__init__()
        inv_freq = _rope_inv_freq(config, head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        scaling = getattr(config, "rope_scaling", None) or {}
        self.dynamic = scaling.get("rope_type", scaling.get("type")) == "dynamic"
        self.factor = float(scaling.get("factor", 1.0))
        self.base = float(getattr(config, "rope_theta", 10000.0))
        self.head_dim = head_dim
        self.max_positions = int(getattr(config, "max_position_embeddings", 2048))

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self.inv_freq.to(x.device)
        seq_len = int(position_ids.max()) + 1
        if self.dynamic and seq_len > self.max_positions:  # dynamic NTK scaling: a larger base past the trained length
            base = self.base * ((self.factor * seq_len / self.max_positions) - (self.factor - 1)) ** (
                self.head_dim / (self.head_dim - 2))
            inv_freq = 1.0 / (base ** (torch.arange(0, self.head_dim, 2, device=x.device).float() / self.head_dim))
        # fp32 angles: positions times frequencies lose precision in bf16/fp16
        freqs = position_ids[:, :, None].float() * inv_freq.float()[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                  sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (b, s, d) -> (b, 1, s, d): the same angle for every head
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _combined_mask(attention_mask: torch.Tensor | None, q_len: int, kv_len: int, device: torch.device,
                   dtype: torch.dtype) -> torch.Tensor | None:
    """The attn_mask for SDPA, or None when plain causal attention (``is_causal``) covers it.

    4-D masks (Hugging Face's prepared masks: additive floats or booleans, causality included) are used as given;
    2-D padding masks (1 = token, 0 = padding) are combined with the causal mask. Query rows with nothing to
    attend to (padding) attend to everything instead of producing NaN; their outputs are ignored downstream.
    """
    if attention_mask is not None and attention_mask.dim() == 4:
        mask = attention_mask[:, :, -q_len:, :kv_len]
        return mask if mask.dtype == torch.bool else mask.to(dtype)
    past = kv_len - q_len
    if attention_mask is None and past == 0:
        return None
    keys = torch.arange(kv_len, device=device)
    allowed = keys[None, :] <= (torch.arange(q_len, device=device)[:, None] + past)  # (q, kv) causal with a cache
    allowed = allowed[None, None]
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            raise ValueError(f"LlamaFlashAttention: attention_mask of shape {tuple(attention_mask.shape)}; expected a "
                             "2-D padding mask (batch, keys) or a 4-D mask (batch, 1, queries, keys)")
        allowed = allowed & attention_mask[:, None, None, -kv_len:].to(device=device, dtype=torch.bool)
    return allowed | ~allowed.any(dim=-1, keepdim=True)


class LlamaFlashAttention(nn.Module):
    """Multi-head / grouped-query Llama self-attention: ``LlamaFlashAttention(config, layer_idx=None)``.

    Parameters ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` (biases when ``config.attention_bias``) match Hugging
    Face's LlamaAttention, so its weights copy or load in. Under ``tsm.transform`` tensor parallelism the heads are
    split by the projections; reshapes use the local head count.
    """

    def __init__(self, config: Any, layer_idx: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.hidden_size = int(config.hidden_size)
        self.num_heads = int(config.num_attention_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or self.hidden_size // self.num_heads)
        self.num_key_value_heads = int(getattr(config, "num_key_value_heads", None) or self.num_heads)
        if self.num_heads % self.num_key_value_heads:
            raise ValueError(f"LlamaFlashAttention: num_attention_heads ({self.num_heads}) must be a multiple of "
                             f"num_key_value_heads ({self.num_key_value_heads})")
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.max_position_embeddings = int(getattr(config, "max_position_embeddings", 2048))
        self.rope_theta = float(getattr(config, "rope_theta", 10000.0))
        self.attention_dropout = float(getattr(config, "attention_dropout", 0.0) or 0.0)
        # Slicing the projections into pretraining_tp pieces (HF) reproduces pretraining's rounding only; the math
        # is the same, so the attribute is kept for scripts that set it and the projections run whole.
        self.pretraining_tp = int(getattr(config, "pretraining_tp", 1) or 1)
        self.is_causal = True
        self.scaling = self.head_dim ** -0.5
        bias = bool(getattr(config, "attention_bias", False))
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=bias)
        self.rotary_emb = _RotaryEmbedding(config, self.head_dim)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, past_key_value: Any = None,
                output_attentions: bool = False, use_cache: bool = False,
                cache_position: torch.LongTensor | None = None,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                **kwargs: Any) -> tuple[Any, ...]:
        for later_name in ("past_key_values", "cache"):  # later transformers' names for the same argument
            if past_key_value is None:
                past_key_value = kwargs.pop(later_name, None)
        if self.training and torch.is_grad_enabled() and past_key_value is not None and hasattr(past_key_value,
                                                                                                  "update"):
            # A training step reads no cache, and activation checkpointing's recompute would append to the
            # model's per-step Cache a second time (other shapes than the forward saved).
            past_key_value = None
        bsz, q_len, _ = hidden_states.shape
        # -1 heads: under tensor parallelism the projections return this rank's heads only.
        q = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)

        past_len = _cached_length(past_key_value, self.layer_idx)
        if position_embeddings is not None:  # the model's own rotary embedding (transformers >= 4.45)
            cos, sin = position_embeddings
        else:
            if position_ids is None:
                start = int(cache_position[0]) if cache_position is not None else past_len
                position_ids = torch.arange(start, start + q_len, device=hidden_states.device)[None].expand(bsz, -1)
            cos, sin = self.rotary_emb(v, position_ids)
        q, k = _apply_rotary(q, k, cos, sin)

        present: Any = None
        if past_key_value is not None and hasattr(past_key_value, "update"):  # a transformers Cache object
            k, v = past_key_value.update(k, v, self.layer_idx,
                                         {"sin": sin, "cos": cos, "cache_position": cache_position})
            present = past_key_value
        else:
            if past_key_value is not None:  # legacy (k, v) of earlier tokens
                k = torch.cat([past_key_value[0], k], dim=2)
                v = torch.cat([past_key_value[1], v], dim=2)
            present = (k, v) if use_cache else None

        groups = q.shape[1] // k.shape[1]
        k_all, v_all = (t.repeat_interleave(groups, dim=1) for t in (k, v)) if groups > 1 else (k, v)
        mask = _combined_mask(attention_mask, q_len, k_all.shape[2], q.device, q.dtype)
        dropout = self.attention_dropout if self.training else 0.0
        weights = None
        if output_attentions:  # the fused kernels never form the weights: compute them explicitly
            scores = (q @ k_all.transpose(2, 3)) * self.scaling
            if mask is None:
                mask = torch.ones(q_len, k_all.shape[2], dtype=torch.bool, device=q.device).tril(k_all.shape[2] - q_len)
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = F.dropout(weights, p=dropout, training=self.training) @ v_all
        else:
            out = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, dropout_p=dropout,
                                                 is_causal=mask is None, scale=self.scaling)
        out = self.o_proj(out.transpose(1, 2).reshape(bsz, q_len, -1))
        if _returns_two():
            return out, weights
        return out, weights, present


def _cached_length(past_key_value: Any, layer_idx: int | None) -> int:
    """Tokens already in the cache (0 without one)."""
    if past_key_value is None:
        return 0
    if hasattr(past_key_value, "get_seq_length"):
        return int(past_key_value.get_seq_length(layer_idx or 0))
    return int(past_key_value[0].shape[-2])


__all__ = ["LlamaFlashAttention"]
