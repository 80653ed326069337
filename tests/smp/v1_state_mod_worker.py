"""Runs under torchrun (2 ranks, gloo, tensor_parallel_degree 2) through AWS's import paths: smp.init with
static_mode, state_mod.state's tp-group name/index maps, utils.get_distribution_axis used the way AWS's GPT-2 fp16
helpers merge and slice shards, and the GPT-2 translators with a Hugging Face-layout model. RESULT line on rank 0."""
from __future__ import annotations

import json
import warnings

import smdistributed.modelparallel.torch as smp
import torch
import torch.distributed as dist
import torch.nn.functional as F
from smdistributed.modelparallel.torch.nn.huggingface.gpt2 import (
    translate_hf_state_dict_to_smdistributed,
    translate_state_dict_to_hf_gpt2,
)
from smdistributed.modelparallel.torch.state_mod import state as smp_state
from smdistributed.modelparallel.torch.utils import get_distribution_axis
from torch import nn

WIDTH, VOCAB, SEQ = 8, 16, 6


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.attn.c_proj = nn.Linear(3 * WIDTH, WIDTH)
        self.attn.register_buffer("bias", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)).view(1, 1, SEQ, SEQ))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.attn.c_proj(torch.tanh(self.attn.c_attn(self.ln_1(h))))


class TinyGPT(nn.Module):
    """Hugging Face GPT-2's key layout (transformer.wte / wpe / h.N / ln_f, lm_head) on nn.Linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(VOCAB, WIDTH)
        self.transformer.wpe = nn.Embedding(SEQ, WIDTH)
        self.transformer.h = nn.ModuleList([Block(), Block()])
        self.transformer.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.transformer.wte(ids) + self.transformer.wpe(torch.arange(ids.shape[1]))
        for block in self.transformer.h:
            h = block(h)
        return self.lm_head(self.transformer.ln_f(h))


def main() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        smp.init({"tensor_parallel_degree": 2, "ddp": True, "static_mode": True})
    static_warnings = [str(w.message) for w in caught if "static_mode" in str(w.message)]

    torch.manual_seed(0)
    with smp.tensor_parallelism():
        net = TinyGPT()
    model = smp.DistributedModel(net)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and "ln" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (n.endswith("weight") and "ln" not in n)]
    optimizer = smp.DistributedOptimizer(torch.optim.Adam(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2))

    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(smp.rank()))
    loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), ids.reshape(-1))
    model.backward(loss)
    optimizer.step()

    # --- state_mod.state: every tp rank's name -> optimizer index map, and its inverse -------------------
    name_to_index = smp_state.param_name_to_index_tp_group
    index_to_name = smp_state.param_index_to_name_tp_group
    cached = name_to_index is smp_state.param_name_to_index_tp_group
    opt_state = optimizer.state_dict()["state"]
    params = dict(model.local_named_parameters())
    mine = name_to_index[smp.tp_rank()]
    # the index is torch's numbering: Adam's state under that index has the parameter's shape
    index_matches = all(tuple(opt_state[i]["exp_avg"].shape) == tuple(params[n].shape) for n, i in mine.items())
    inverse = all(index_to_name[r][i] == n for r in range(smp.tp_size()) for n, i in name_to_index[r].items())

    # --- utils.get_distribution_axis, used as AWS's fp16 helpers use it ---------------------------------
    axes = {n: get_distribution_axis(p) for n, p in params.items()}
    merged_ok, sliced_ok = True, True
    for n, p in params.items():
        axis = axes[n]
        if axis is None:
            continue
        shards = smp.allgather(p.to_local().detach().cpu(), smp.TP_GROUP)  # merge across the tp group
        merged_ok &= torch.equal(torch.cat(shards, axis), p.full_tensor().detach())
        full = p.full_tensor().detach()
        size = full.size(axis) // smp.tp_size()  # load: narrow the full tensor to this rank's slice
        sliced_ok &= torch.equal(torch.narrow(full, axis, size * smp.tp_rank(), size), p.to_local().detach())

    # --- GPT-2 translators with a Hugging Face-layout model --------------------------------------------
    torch.manual_seed(1)
    other = TinyGPT()
    # a GPT2Model-style checkpoint (no "transformer." prefix, no lm_head) plus the LM head under its own name
    hf = {k[len("transformer."):]: v for k, v in other.state_dict().items() if k.startswith("transformer.")
          and not k.endswith(".attn.bias")}
    hf["lm_head.weight"] = other.lm_head.weight.detach()
    model.load_state_dict(translate_hf_state_dict_to_smdistributed(hf, SEQ))
    loaded = all(torch.equal(v.full_tensor() if hasattr(v, "full_tensor") else v, other.state_dict()[k])
                 for k, v in model.state_dict().items())
    back = translate_state_dict_to_hf_gpt2({"module." + k: v for k, v in model.state_dict().items()}, SEQ)
    # the model's own keys, plus the mask buffers older Hugging Face versions keep (added for max_seq_len)
    extra = set(back) - set(other.state_dict())
    back_keys = (set(other.state_dict()) <= set(back)
                 and extra == {f"transformer.h.{i}.attn.masked_bias" for i in (0, 1)})

    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({
            "check": "state_mod", "static_warnings": static_warnings, "tp_size": len(name_to_index),
            "same_names": [sorted(m) for m in name_to_index] == [sorted(mine)] * smp.tp_size(),
            "num_params": len(mine), "cached": cached, "index_matches": index_matches, "inverse": inverse,
            "axes": axes, "merged_ok": merged_ok, "sliced_ok": sliced_ok, "loaded": loaded, "back_keys": back_keys,
        }), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
