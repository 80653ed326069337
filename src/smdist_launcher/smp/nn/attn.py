"""``torch.sagemaker.nn.attn``: ``FlashSelfAttention`` over PyTorch's fused attention (SDPA picks flash or
memory-efficient kernels on GPUs, the math kernel on CPU)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

_LAYOUTS = ("b h s d", "b s h d")


class FlashSelfAttention(nn.Module):
    """Called as ``flashmod((q, k, v), causal=True, cast_dtype=dtype, layout="b h s d")``; returns the layout given."""

    def __init__(self, attention_dropout_prob: float = 0.0, scale: float | None = None,
                 triton_flash_attention: bool = False, use_alibi: bool = False) -> None:
        super().__init__()
        if use_alibi:
            raise NotImplementedError("FlashSelfAttention(use_alibi=True) is not implemented by this runtime")
        self.dropout_p = attention_dropout_prob
        self.scale = scale

    def forward(self, qkv: Sequence[torch.Tensor] | torch.Tensor, attn_mask: torch.Tensor | None = None,
                causal: bool = False, cast_dtype: torch.dtype | None = None, layout: str = "b h s d") -> torch.Tensor:
        if layout not in _LAYOUTS:
            raise ValueError(f"FlashSelfAttention: layout {layout!r} is not one of {_LAYOUTS}")
        q, k, v = qkv.unbind(dim=2) if isinstance(qkv, torch.Tensor) else qkv  # packed: b s 3 h d
        if isinstance(qkv, torch.Tensor):
            layout = "b s h d"
        dtype = q.dtype
        if cast_dtype is not None and q.is_cuda:
            q, k, v = (t.to(cast_dtype) for t in (q, k, v))
        if layout == "b s h d":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal and attn_mask is None,
                                             dropout_p=self.dropout_p if self.training else 0.0, scale=self.scale)
        if layout == "b s h d":
            out = out.transpose(1, 2)
        return out.to(dtype)


class FlashGroupedQueryAttention(nn.Module):
    """Called as ``attn(q, (k, v), causal=True, cast_dtype=dtype, layout="b s h d")``: k and v carry fewer heads
    than q (grouped-query attention); each k/v head serves ``q heads / kv heads`` query heads."""

    def __init__(self, attention_dropout_prob: float = 0.0, scale: float | None = None,
                 triton_flash_attention: bool = False, use_alibi: bool = False) -> None:
        super().__init__()
        self.inner = FlashSelfAttention(attention_dropout_prob, scale, triton_flash_attention, use_alibi)

    def forward(self, q: torch.Tensor, kv: Sequence[torch.Tensor] | torch.Tensor, attn_mask: torch.Tensor | None = None,
                causal: bool = False, cast_dtype: torch.dtype | None = None, layout: str = "b s h d") -> torch.Tensor:
        k, v = kv.unbind(dim=2) if isinstance(kv, torch.Tensor) else kv  # packed: b s 2 h d
        if isinstance(kv, torch.Tensor) and layout != "b s h d":
            raise ValueError("FlashGroupedQueryAttention: packed kv needs layout 'b s h d'")
        head_dim = 2 if layout == "b s h d" else 1
        groups = q.shape[head_dim] // k.shape[head_dim]
        if groups * k.shape[head_dim] != q.shape[head_dim]:
            raise ValueError(f"FlashGroupedQueryAttention: {q.shape[head_dim]} query heads are not a multiple of "
                             f"{k.shape[head_dim]} key/value heads")
        k, v = (t.repeat_interleave(groups, dim=head_dim) for t in (k, v))
        return self.inner((q, k, v), attn_mask=attn_mask, causal=causal, cast_dtype=cast_dtype, layout=layout)
