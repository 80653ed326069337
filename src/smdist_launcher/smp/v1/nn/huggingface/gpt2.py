"""GPT-2 state dicts: Hugging Face (GPT2LMHeadModel / GPT2Model) <-> smp.nn.DistributedTransformerLMHead.

The smp side is the key layout of ``DistributedTransformerLMHead(pre_layernorm=True, post_layernorm=True, ...)``
(GPT-2's layout: pre-LN layers, a final LayerNorm, the LM head tied to the word embedding). Hugging Face's
Conv1D stores weights as [in, out]; nn.Linear as [out, in], so weights are transposed, and c_attn is split
into query/key/value. A leading "module." (DistributedModel, DDP) is ignored on input.

SMP swapped a Hugging Face GPT-2 built inside ``smp.tensor_parallelism()`` for DistributedTransformerLMHead, so
AWS's scripts translate around every load/save. Here that model stays a Hugging Face model (its layers are split
in place), so the layout-neutral translators (``translate_hf_state_dict_to_smdistributed``,
``translate_state_dict_to_hf_gpt2``) translate into the layout the DistributedModel actually has.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from ...state import state as _v1_state

_LAYER = re.compile(r"^h\.(\d+)\.(.+)$")
_SMP_LAYER = re.compile(r"^transformer\.seq_layers\.(\d+)\.(.+)$")

# per-layer parameter: HF suffix -> smp suffix (weights that are not transposed or split)
_NORMS = {"ln_1": "attention.pre_layernorm", "ln_2": "output.pre_layernorm"}
_LINEARS = {"attn.c_proj": "attention.dense", "mlp.c_fc": "output.dense1", "mlp.c_proj": "output.dense2"}


def _strip(key: str, prefixes: tuple[str, ...]) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in prefixes:
            if key.startswith(prefix):
                key, changed = key[len(prefix):], True
    return key


def translate_hf_state_dict_to_smdistributed_gpt2(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Hugging Face GPT-2 state dict -> DistributedTransformerLMHead's keys."""
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for raw_key, value in state_dict.items():
        key = _strip(raw_key, ("module.", "transformer."))
        if key == "lm_head.weight":
            continue  # tied to the word embedding
        if key == "wte.weight":
            out["word_embedding.weight"] = value
        elif key == "wpe.weight":
            out["position_embedding.weight"] = value
        elif key.startswith("ln_f."):
            out["transformer.layernorm." + key[len("ln_f."):]] = value
        elif (m := _LAYER.match(key)) is not None:
            i, rest = m.group(1), m.group(2)
            prefix = f"transformer.seq_layers.{i}."
            module, _, leaf = rest.rpartition(".")
            if rest in ("attn.bias", "attn.masked_bias"):
                continue  # causal-mask buffers: the smp layer builds its mask from causal_mask_size
            if module in _NORMS:
                out[prefix + _NORMS[module] + "." + leaf] = value
            elif module == "attn.c_attn":
                for name, part in zip(("query", "key", "value"), value.chunk(3, dim=-1), strict=True):
                    out[f"{prefix}attention.{name}.{leaf}"] = (part.t().contiguous() if leaf == "weight"
                                                               else part.clone())
            elif module in _LINEARS:
                out[prefix + _LINEARS[module] + "." + leaf] = value.t().contiguous() if leaf == "weight" else value
            else:
                unknown.append(raw_key)
        else:
            unknown.append(raw_key)
    if unknown:
        raise KeyError(f"translate_hf_state_dict_to_smdistributed_gpt2: keys that are not GPT-2's: {unknown[:5]}"
                       f"{' ...' if len(unknown) > 5 else ''}")
    return out


def _model_keys() -> list[str] | None:
    """State-dict keys of the smp.DistributedModel's module, or None before one exists."""
    model = _v1_state.model
    if model is None:
        return None
    return list(model.module.state_dict(keep_vars=True).keys())


def _is_smp_layout(keys: list[str]) -> bool:
    return any(k == "word_embedding.weight" or _SMP_LAYER.match(k) for k in keys)


def _to_model_hf_keys(state_dict: Mapping[str, torch.Tensor], model_keys: list[str]) -> dict[str, torch.Tensor]:
    """A Hugging Face GPT-2 state dict keyed like the (Hugging Face) model: GPT2Model keys get "transformer." when
    the model is a GPT2LMHeadModel; causal-mask buffers the checkpoint lacks are taken from the model (constants)."""
    own = set(model_keys)
    out: dict[str, torch.Tensor] = {}
    for raw_key, value in state_dict.items():
        key = _strip(raw_key, ("module.",))
        if key not in own and "transformer." + key in own:
            key = "transformer." + key
        elif key not in own and key.startswith("transformer.") and key[len("transformer."):] in own:
            key = key[len("transformer."):]
        out[key] = value
    model = _v1_state.model.module
    for key in own - set(out):
        if key.endswith((".attn.bias", ".attn.masked_bias")):
            out[key] = model.get_buffer(key).detach().clone()
    return out


def translate_hf_state_dict_to_smdistributed(state_dict: Mapping[str, torch.Tensor],
                                             max_seq_len: int | None = None) -> dict[str, torch.Tensor]:
    """A Hugging Face GPT-2 state dict -> the layout of this process's smp.DistributedModel (AWS's GPT-2 example:
    ``model.load_state_dict(translate_hf_state_dict_to_smdistributed(checkpoint["model"], seq_length))``).

    A Hugging Face model under DistributedModel keeps its own keys, so they are only aligned with it; a
    DistributedTransformerLMHead (or no model yet) gets translate_hf_state_dict_to_smdistributed_gpt2's keys.
    ``max_seq_len`` sized SMP's causal-mask buffers: the smp layers build theirs from causal_mask_size and a
    Hugging Face model keeps its own, so it is not needed.
    """
    keys = _model_keys()
    if keys is not None and not _is_smp_layout(keys):
        return _to_model_hf_keys(state_dict, keys)
    return translate_hf_state_dict_to_smdistributed_gpt2(state_dict)


def _causal_mask_buffers(out: dict[str, torch.Tensor], layers: set[str], max_seq_len: int) -> None:
    for i in layers:
        out.setdefault(f"transformer.h.{i}.attn.bias", torch.tril(
            torch.ones(max_seq_len, max_seq_len, dtype=torch.bool)).view(1, 1, max_seq_len, max_seq_len))
        out.setdefault(f"transformer.h.{i}.attn.masked_bias", torch.tensor(-1e4))


def translate_state_dict_to_hf_gpt2(state_dict: Mapping[str, torch.Tensor],
                                    max_seq_len: int | None = None) -> dict[str, torch.Tensor]:
    """DistributedTransformerLMHead's state dict (full, e.g. model.state_dict() or smp.save(partial=False)) -> a
    Hugging Face GPT2LMHeadModel state dict. ``max_seq_len`` adds the causal-mask buffers older versions keep.

    A state dict that already has Hugging Face GPT-2 keys (the model here stays a Hugging Face model, see the
    module docstring) is returned with "module." removed (and the mask buffers added for ``max_seq_len``)."""
    plain = {_strip(k, ("module.",)): v for k, v in state_dict.items()}
    if plain and not _is_smp_layout(list(plain)) and any(
            k.startswith(("transformer.wte.", "transformer.h.")) for k in plain):
        if max_seq_len is not None:
            layer_ids = {m.group(1) for k in plain if (m := _LAYER.match(k[len("transformer."):])) is not None}
            _causal_mask_buffers(plain, layer_ids, max_seq_len)
        return plain
    out: dict[str, torch.Tensor] = {}
    layers: dict[str, dict[str, torch.Tensor]] = {}
    reverse_norms = {v: k for k, v in _NORMS.items()}
    reverse_linears = {v: k for k, v in _LINEARS.items()}
    for raw_key, value in state_dict.items():
        key = _strip(raw_key, ("module.",))
        if key == "word_embedding.weight":
            out["transformer.wte.weight"] = value
            out["lm_head.weight"] = value
        elif key == "position_embedding.weight":
            out["transformer.wpe.weight"] = value
        elif key.startswith("transformer.layernorm."):
            out["transformer.ln_f." + key[len("transformer.layernorm."):]] = value
        elif (m := _SMP_LAYER.match(key)) is not None:
            i, rest = m.group(1), m.group(2)
            module, _, leaf = rest.rpartition(".")
            prefix = f"transformer.h.{i}."
            if module in reverse_norms:
                out[prefix + reverse_norms[module] + "." + leaf] = value
            elif module in ("attention.query", "attention.key", "attention.value"):
                layers.setdefault(f"{i}.{leaf}", {})[module.split(".")[1]] = value
            elif module in reverse_linears:
                out[prefix + reverse_linears[module] + "." + leaf] = (value.t().contiguous() if leaf == "weight"
                                                                      else value)
            else:
                raise KeyError(f"translate_state_dict_to_hf_gpt2: {raw_key!r} has no GPT-2 counterpart (GPT-2 is "
                               "DistributedTransformerLMHead with pre_layernorm=True, post_layernorm=True)")
        else:
            raise KeyError(f"translate_state_dict_to_hf_gpt2: {raw_key!r} has no GPT-2 counterpart")
    for where, parts in layers.items():
        i, leaf = where.split(".")
        if set(parts) != {"query", "key", "value"}:
            raise KeyError(f"translate_state_dict_to_hf_gpt2: layer {i} lacks one of query/key/value {leaf}")
        pieces = [parts[n].t() if leaf == "weight" else parts[n] for n in ("query", "key", "value")]
        out[f"transformer.h.{i}.attn.c_attn.{leaf}"] = torch.cat(pieces, dim=-1).contiguous()
        if max_seq_len is not None and leaf == "weight":
            _causal_mask_buffers(out, {i}, max_seq_len)
    return out
