"""``smp.nn``: SMP v1's distributed modules, built from torch modules whose Linear/Embedding leaves are marked for
tensor parallelism (DistributedModel splits them over the tp group, see ..tensor_parallel).

Arguments are the global sizes, as in SMP. Semantics follow AWS's reference implementations, with two choices
documented in docs/compat.md: the attention and output blocks always add their residual (pre- or post-LN), and a
DistributedTransformer with both pre_layernorm and post_layernorm gives its layers pre-LN and adds one final LN
(GPT-2's layout); with post_layernorm alone the layers are post-LN (BERT's layout).
"""
from __future__ import annotations

import functools
import math
from typing import Any, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..notices import warn_once
from ..state import state
from ..tp_keywords import accepts_overrides

_MASKED = -10000.0  # additive score of a masked key (finite, so a fully masked row stays finite)


class DistributedModule(nn.Module):
    """Base class of the smp.nn modules (and of user modules registered with smp.tp_register)."""


_M = TypeVar("_M", bound=nn.Module)


def _mark(module: _M, tied: bool = False) -> _M:
    state.tp_marks[id(module)] = {}
    if tied:
        cast(Any, module)._smp_tied = True  # shares its weight (LM head): stays replicated
    return module


def _init_linear(linear: nn.Linear, normal: bool, std: float) -> nn.Linear:
    if normal:
        nn.init.normal_(linear.weight, std=std)
        if linear.bias is not None:
            nn.init.zeros_(linear.bias)
    return linear


def _activation(name: str):
    if name == "gelu":
        return F.gelu
    if name == "relu":
        return F.relu
    raise ValueError(f"smp.nn: activation={name!r} is not supported; use 'gelu' or 'relu'")


def _check_norms(pre: bool, post: bool, where: str) -> None:
    if not (pre or post):
        raise ValueError(f"smp.nn.{where}: at least one of pre_layernorm and post_layernorm must be True")


@accepts_overrides
class DistributedLinear(nn.Linear, DistributedModule):
    """nn.Linear whose output features are split over the tp group (global in/out sizes)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, **kwargs: Any) -> None:
        super().__init__(in_features, out_features, bias=bias, **kwargs)
        _mark(self)


@accepts_overrides
class DistributedEmbedding(nn.Embedding, DistributedModule):
    """nn.Embedding split over the embedding dim."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: torch.Tensor | None = None, initializer_range: float = 0.02,
                 _skip_allgather: bool = False, _skip_scatter_and_merge: bool = False) -> None:
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx, max_norm=max_norm,
                         norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=_weight)
        if _skip_allgather or _skip_scatter_and_merge:
            warn_once("emb-skip", "DistributedEmbedding(_skip_allgather/_skip_scatter_and_merge) are SMP-internal "
                      "layout switches; they have no effect here (outputs always have the full embedding dim)")
        _mark(self)


class FusedLayerNorm(nn.LayerNorm):
    """apex's FusedLayerNorm interface; torch's LayerNorm computes the same function (no apex needed)."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine, **kwargs)


@accepts_overrides
class DistributedAttentionLayer(DistributedModule):
    def __init__(self, num_attention_heads: int = 32, attention_head_size: int = 32, hidden_size: int = 1024,
                 attention_dropout_prob: float = 0.1, hidden_dropout_prob: float = 0.1,
                 layernorm_epsilon: float = 1e-5, initializer_range: float = 0.02,
                 use_normal_initialization: bool = False, cross_attention: bool = False,
                 causal_mask_size: int | None = None, pre_layernorm: bool = False, post_layernorm: bool = True,
                 attention_in_fp32: bool = False, query_key_layer_scaling: bool = False, layer_idx: int = 0,
                 scale_attention_scores: bool = True) -> None:
        super().__init__()
        _check_norms(pre_layernorm, post_layernorm, "DistributedAttentionLayer")
        self.num_attention_heads, self.attention_head_size = num_attention_heads, attention_head_size
        self.cross_attention, self.causal_mask_size = cross_attention, causal_mask_size
        self.attention_in_fp32, self.query_key_layer_scaling = attention_in_fp32, query_key_layer_scaling
        self.layer_idx, self.scale_attention_scores = layer_idx, scale_attention_scores
        inner = num_attention_heads * attention_head_size
        lin = functools.partial(_init_linear, normal=use_normal_initialization, std=initializer_range)
        self.query = lin(_mark(nn.Linear(hidden_size, inner)))
        self.key = lin(_mark(nn.Linear(hidden_size, inner)))
        self.value = lin(_mark(nn.Linear(hidden_size, inner)))
        self.dense = lin(_mark(nn.Linear(inner, hidden_size)))
        self.dropout1 = nn.Dropout(attention_dropout_prob)
        self.dropout2 = nn.Dropout(hidden_dropout_prob)
        self.pre_layernorm = nn.LayerNorm(hidden_size, eps=layernorm_epsilon) if pre_layernorm else None
        self.layernorm = nn.LayerNorm(hidden_size, eps=layernorm_epsilon) if post_layernorm else None

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        n, s, _ = t.shape
        return t.reshape(n, s, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

    def forward(self, inputs: tuple) -> torch.Tensor:
        if self.cross_attention:
            hidden, cross, mask = inputs
        else:
            (hidden, mask), cross = inputs, None
        normed = self.pre_layernorm(hidden) if self.pre_layernorm is not None else hidden
        source = cross if cross is not None else normed
        q, k, v = self._heads(self.query(normed)), self._heads(self.key(source)), self._heads(self.value(source))
        dtype = torch.float32 if self.attention_in_fp32 else q.dtype
        # query_key_layer_scaling divides the scores by (layer_idx + 1) before the product and multiplies back
        # inside the softmax (Megatron's overflow guard for fp16): the same function, computed in that order.
        coeff = float(self.layer_idx + 1) if self.query_key_layer_scaling else 1.0
        scale = (1.0 / math.sqrt(self.attention_head_size) if self.scale_attention_scores else 1.0) / coeff
        scores = torch.matmul(q.to(dtype) * scale, k.to(dtype).transpose(-1, -2))
        if self.causal_mask_size is not None and not self.cross_attention:
            s_q, s_k = scores.shape[-2], scores.shape[-1]
            causal = torch.ones(s_q, s_k, dtype=torch.bool, device=scores.device).tril(s_k - s_q)
            scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        if mask is not None:
            scores = scores + mask.to(scores.dtype)
        probs = F.softmax(scores * coeff, dim=-1).to(v.dtype)
        context = torch.matmul(self.dropout1(probs), v).transpose(1, 2)
        context = context.reshape(context.shape[0], context.shape[1], -1)
        out = self.dropout2(self.dense(context)) + hidden
        return self.layernorm(out) if self.layernorm is not None else out


@accepts_overrides
class DistributedTransformerOutputLayer(DistributedModule):
    def __init__(self, hidden_size: int = 1024, intermediate_size: int = 4096, hidden_dropout_prob: float = 0.1,
                 activation: str = "gelu", layernorm_epsilon: float = 1e-5, initializer_range: float = 0.02,
                 use_normal_initialization: bool = False, pre_layernorm: bool = False, post_layernorm: bool = True,
                 fp32_residual_addition: bool = False) -> None:
        super().__init__()
        _check_norms(pre_layernorm, post_layernorm, "DistributedTransformerOutputLayer")
        self.act = _activation(activation)
        self.fp32_residual_addition = fp32_residual_addition
        lin = functools.partial(_init_linear, normal=use_normal_initialization, std=initializer_range)
        self.dense1 = lin(_mark(nn.Linear(hidden_size, intermediate_size)))
        self.dense2 = lin(_mark(nn.Linear(intermediate_size, hidden_size)))
        self.dropout = nn.Dropout(hidden_dropout_prob)
        self.pre_layernorm = nn.LayerNorm(hidden_size, eps=layernorm_epsilon) if pre_layernorm else None
        self.layernorm = nn.LayerNorm(hidden_size, eps=layernorm_epsilon) if post_layernorm else None

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        normed = self.pre_layernorm(inputs) if self.pre_layernorm is not None else inputs
        out = self.dropout(self.dense2(self.act(self.dense1(normed))))
        out = (out.float() + inputs.float()).to(inputs.dtype) if self.fp32_residual_addition else out + inputs
        return self.layernorm(out) if self.layernorm is not None else out


@accepts_overrides
class DistributedTransformerLayer(DistributedModule):
    def __init__(self, num_attention_heads: int = 32, attention_head_size: int = 32, hidden_size: int = 1024,
                 intermediate_size: int = 4096, attention_dropout_prob: float = 0.1, hidden_dropout_prob: float = 0.1,
                 activation: str = "gelu", layernorm_epsilon: float = 1e-5, initializer_range: float = 0.02,
                 use_normal_initialization: bool = False, causal_mask_size: int | None = None,
                 add_cross_attention: bool = False, pre_layernorm: bool = False, post_layernorm: bool = True,
                 attention_in_fp32: bool = False, query_key_layer_scaling: bool = False, layer_idx: int = 0,
                 fp32_residual_addition: bool = False) -> None:
        super().__init__()
        common: dict[str, Any] = dict(num_attention_heads=num_attention_heads, attention_head_size=attention_head_size,
                      hidden_size=hidden_size, attention_dropout_prob=attention_dropout_prob,
                      hidden_dropout_prob=hidden_dropout_prob, layernorm_epsilon=layernorm_epsilon,
                      initializer_range=initializer_range, use_normal_initialization=use_normal_initialization,
                      pre_layernorm=pre_layernorm, post_layernorm=post_layernorm,
                      attention_in_fp32=attention_in_fp32, query_key_layer_scaling=query_key_layer_scaling,
                      layer_idx=layer_idx)
        self.add_cross_attention = add_cross_attention
        self.attention = DistributedAttentionLayer(causal_mask_size=causal_mask_size, **common)
        self.cross_attention = (DistributedAttentionLayer(cross_attention=True, **common) if add_cross_attention
                                else None)
        self.output = DistributedTransformerOutputLayer(
            hidden_size=hidden_size, intermediate_size=intermediate_size, hidden_dropout_prob=hidden_dropout_prob,
            activation=activation, layernorm_epsilon=layernorm_epsilon, initializer_range=initializer_range,
            use_normal_initialization=use_normal_initialization, pre_layernorm=pre_layernorm,
            post_layernorm=post_layernorm, fp32_residual_addition=fp32_residual_addition)

    def forward(self, inputs: tuple) -> tuple:
        if self.add_cross_attention:
            hidden, cross, mask, cross_mask = inputs
        else:
            hidden, mask = inputs
        out = self.attention((hidden, mask))
        if self.cross_attention is not None:
            out = self.cross_attention((out, cross, cross_mask))
        out = self.output(out)
        return (out, cross, mask, cross_mask) if self.add_cross_attention else (out, mask)


@accepts_overrides
class DistributedTransformer(DistributedModule):
    def __init__(self, num_layers: int = 12, num_attention_heads: int = 32, attention_head_size: int = 32,
                 hidden_size: int = 1024, intermediate_size: int = 4096, attention_dropout_prob: float = 0.1,
                 hidden_dropout_prob: float = 0.1, activation: str = "gelu", layernorm_epsilon: float = 1e-5,
                 initializer_range: float = 0.02, use_normal_initialization: bool = False,
                 causal_mask_size: int | None = None, add_cross_attention: bool = False, pre_layernorm: bool = False,
                 post_layernorm: bool = True, attention_in_fp32: bool = False, query_key_layer_scaling: bool = False,
                 fp32_residual_addition: bool = False) -> None:
        super().__init__()
        _check_norms(pre_layernorm, post_layernorm, "DistributedTransformer")
        final_norm = pre_layernorm and post_layernorm
        self.seq_layers = nn.Sequential(*[DistributedTransformerLayer(
            num_attention_heads=num_attention_heads, attention_head_size=attention_head_size, hidden_size=hidden_size,
            intermediate_size=intermediate_size, attention_dropout_prob=attention_dropout_prob,
            hidden_dropout_prob=hidden_dropout_prob, activation=activation, layernorm_epsilon=layernorm_epsilon,
            initializer_range=initializer_range, use_normal_initialization=use_normal_initialization,
            causal_mask_size=causal_mask_size, add_cross_attention=add_cross_attention, pre_layernorm=pre_layernorm,
            post_layernorm=post_layernorm and not final_norm, attention_in_fp32=attention_in_fp32,
            query_key_layer_scaling=query_key_layer_scaling, layer_idx=i,
            fp32_residual_addition=fp32_residual_addition) for i in range(num_layers)])
        self.layernorm = nn.LayerNorm(hidden_size, eps=layernorm_epsilon) if final_norm else None

    def forward(self, inputs: tuple) -> tuple:
        out = self.seq_layers(inputs)
        if self.layernorm is not None:
            out = (self.layernorm(out[0]),) + tuple(out[1:])
        return out


@accepts_overrides
class DistributedTransformerLMHead(DistributedModule):
    """Embeddings (word + position [+ token type]) -> DistributedTransformer -> LM head tied to the word embedding.

    forward((input_ids, attention_mask, token_type_ids, position_ids[, cross_states, cross_mask], labels)): the
    attention mask is 0/1 with 1 = masked, as SMP documents. Returns the logits, or (loss, logits) when labels are
    given (next-token cross entropy, labels shifted by one, -100 ignored: the Hugging Face convention).
    """

    def __init__(self, num_layers: int = 12, num_attention_heads: int = 32, attention_head_size: int = 32,
                 hidden_size: int = 1024, intermediate_size: int = 4096, vocab_size: int = 30522,
                 num_positions: int = 1024, attention_dropout_prob: float = 0.1, hidden_dropout_prob: float = 0.1,
                 activation: str = "gelu", layernorm_epsilon: float = 1e-5, num_token_types: int = 0,
                 causal_mask_size: int | None = None, add_cross_attention: bool = False, add_lm_head: bool = True,
                 initializer_range: float = 0.02, use_normal_initialization: bool = False, pre_layernorm: bool = False,
                 post_layernorm: bool = True, attention_in_fp32: bool = False, query_key_layer_scaling: bool = False,
                 fp32_residual_addition: bool = False) -> None:
        super().__init__()
        self.add_cross_attention, self.add_lm_head = add_cross_attention, add_lm_head
        # The word embedding is tied to the LM head: SMP keeps tied modules replicated.
        self.word_embedding = nn.Embedding(vocab_size, hidden_size)
        if add_lm_head:
            cast(Any, self.word_embedding)._smp_tied = True
        self.position_embedding = _mark(nn.Embedding(num_positions, hidden_size))
        self.token_type_embedding = _mark(nn.Embedding(num_token_types, hidden_size)) if num_token_types > 0 else None
        if use_normal_initialization:
            for emb in (self.word_embedding, self.position_embedding, self.token_type_embedding):
                if emb is not None:
                    nn.init.normal_(emb.weight, std=initializer_range)
        self.dropout = nn.Dropout(hidden_dropout_prob)
        self.transformer = DistributedTransformer(
            num_layers=num_layers, num_attention_heads=num_attention_heads, attention_head_size=attention_head_size,
            hidden_size=hidden_size, intermediate_size=intermediate_size, attention_dropout_prob=attention_dropout_prob,
            hidden_dropout_prob=hidden_dropout_prob, activation=activation, layernorm_epsilon=layernorm_epsilon,
            initializer_range=initializer_range, use_normal_initialization=use_normal_initialization,
            causal_mask_size=causal_mask_size, add_cross_attention=add_cross_attention, pre_layernorm=pre_layernorm,
            post_layernorm=post_layernorm, attention_in_fp32=attention_in_fp32,
            query_key_layer_scaling=query_key_layer_scaling, fp32_residual_addition=fp32_residual_addition)

    def forward(self, inputs: Any, *more: Any) -> Any:
        items = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        items = items + more
        n_expected = 8 if self.add_cross_attention else 5
        items = items + (None,) * (n_expected - len(items))
        if self.add_cross_attention:
            input_ids, attention_mask, token_type_ids, position_ids, cross_states, _, cross_mask, labels = items[:8]
        else:
            input_ids, attention_mask, token_type_ids, position_ids, labels = items[:5]
            cross_states = cross_mask = None
        n, s = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(s, device=input_ids.device)
        position_ids = position_ids.expand(n, s)
        hidden = self.word_embedding(input_ids) + self.position_embedding(position_ids)
        if self.token_type_embedding is not None and token_type_ids is not None:
            hidden = hidden + self.token_type_embedding(token_type_ids)
        hidden = self.dropout(hidden)
        mask = None
        if attention_mask is not None:
            mask = attention_mask.reshape(n, 1, 1, s).to(hidden.dtype) * _MASKED
        if self.add_cross_attention:
            cmask = None if cross_mask is None else (
                cross_mask.reshape(n, 1, 1, -1).to(hidden.dtype) * _MASKED)
            hidden = self.transformer((hidden, cross_states, mask, cmask))[0]
        else:
            hidden = self.transformer((hidden, mask))[0]
        if not self.add_lm_head:
            return hidden
        logits = F.linear(hidden, self.word_embedding.weight)
        if labels is None:
            return logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                               ignore_index=-100)
        return loss, logits


class FlashAttentionLayer(DistributedModule):
    """Attention over a packed qkv ``[N, S, 3, heads, head_size]``; returns ``[N, heads, S, head_size]``.

    Runs torch's scaled_dot_product_attention (flash kernels where the device has them); an ALiBi mask is added
    as an additive mask."""

    def __init__(self, attention_dropout_prob: float = 0.1, attention_head_size: int | None = None,
                 scale_attention_scores: bool = True, scale_attn_by_layer_idx: bool = False,
                 layer_idx: int | None = None, scale: float | None = None, triton_flash_attention: bool = False,
                 use_alibi: bool = False) -> None:
        super().__init__()
        if scale is None:
            scale = 1.0
            if scale_attention_scores:
                if attention_head_size is None:
                    raise ValueError("smp.nn.FlashAttentionLayer: scale_attention_scores=True "
                                     "needs attention_head_size")
                scale /= math.sqrt(attention_head_size)
            if scale_attn_by_layer_idx:
                if layer_idx is None:
                    raise ValueError("smp.nn.FlashAttentionLayer: scale_attn_by_layer_idx=True needs layer_idx")
                scale /= layer_idx + 1
        if triton_flash_attention:
            warn_once("flash-triton", "FlashAttentionLayer(triton_flash_attention=True) selects SMP's Triton kernel; "
                      "torch's scaled_dot_product_attention runs instead (same math; dropout is honoured)")
        self.scale, self.dropout_p, self.use_alibi = scale, attention_dropout_prob, use_alibi

    def forward(self, qkv: torch.Tensor, attn_mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        mask = attn_mask if (attn_mask is not None and (self.use_alibi or attn_mask.is_floating_point())) else None
        if causal and mask is not None:
            s = q.shape[-2]
            causal_add = torch.zeros(s, s, dtype=q.dtype, device=q.device).masked_fill(
                ~torch.ones(s, s, dtype=torch.bool, device=q.device).tril(), float("-inf"))
            mask, causal = mask + causal_add, False
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              dropout_p=self.dropout_p if self.training else 0.0,
                                              is_causal=causal, scale=self.scale)
