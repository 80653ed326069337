"""Runs under torchrun on 2 GPUs (NCCL): tsm.transform's TP 2 + tsm.shard_model against one process, per option.

For each of: the defaults (unit_dp, LocalShard, weight recasts), the defaults with ``async_tp`` (symmetric-memory
fused row projections) and the input re-gather, and every option off (FSDP2 over the one-rank mesh, the earlier
behaviour): two AdamW steps of a small reference GPT in fp32 (TF32 off), and the same with bf16 mixed precision
against the all-off run.
Then the vocabulary-parallel loss of a causal LM called with labels (``vploss:*``): in fp32 against one process
(the reference GPT as a Hugging Face-style LM, and transformers' GPT-NeoX where transformers is installed), and
one bf16 step's peak memory with ``TPOptions.vocab_parallel_loss`` on and off (a 32k vocabulary: the logits
dominate).
One ``RESULT {json}`` line on rank 0 per case (tests/smp/test_tp_gpu.py asserts on them).
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy

import smdist_launcher.smp as tsm
from smdist_launcher.smp.grad_norm import clip_grad_norm_
from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state
from smdist_launcher.smp.tensor_parallel import local_modules

CFG = GPTConfig(dim=256, n_layers=2, n_heads=4, vocab_size=512)
CASES = {"default": {}, "async_regather": {"async_tp": True, "regather_input": True},
         "all_off": {"fast_local": False, "unit_dp_without_fsdp": False, "regather_input": False,
                     "recast_weights": False, "async_tp": False}}


def batches(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    out = []
    for _ in range(2):
        t = torch.randint(0, CFG.vocab_size, (4, 65), generator=g).to(device)
        out.append((t[:, :-1], t[:, 1:]))
    return out


def train(model: torch.nn.Module, data, clip) -> tuple[list[float], list[float]]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, norms = [], []
    for x, y in data:
        loss = lm_loss(model(x), y)
        loss.backward()
        losses.append(loss.item())
        norms.append(float(clip(model)))
        opt.step()
        opt.zero_grad()
    return losses, norms


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:  # the script's own CPU smoke run (gloo): async_tp falls back to the plain path there
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    base = GPT(CFG).to(device)
    data = batches(device)
    ref = train(copy.deepcopy(base), data, lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9))
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for precision, policy in (("fp32", None), ("bf16", bf16)):
        for name, kw in CASES.items():
            local_modules.OPTIONS = local_modules.TPOptions(**kw)
            reset_state()
            tsm.init({"tensor_parallel_degree": 2})
            model = tsm.shard_model(tsm.transform(copy.deepcopy(base)), mp_policy=policy)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            got = train(model, data, lambda m: clip_grad_norm_(m, 1e9))
            if dist.get_rank() == 0:
                print("RESULT " + json.dumps({"check": f"{precision}:{name}", "losses": got[0], "norms": got[1],
                                              "ref_losses": ref[0], "ref_norms": ref[1],
                                              "peak_mib": torch.cuda.max_memory_allocated() / 2**20
                                              if device.type == "cuda" else 0.0}), flush=True)
            del model
    local_modules.OPTIONS = local_modules.TPOptions()
    vocab_parallel(device)
    dist.barrier()
    dist.destroy_process_group()


def _emit(row: dict) -> None:
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(row), flush=True)


def _loss_and_norm(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor, clip) -> tuple[float, float, Any]:
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return float(out.loss), float(clip(model)), out.logits


def vocab_parallel(device: torch.device) -> None:
    import importlib.util

    from torch.distributed.tensor import DTensor

    from smdist_launcher.smp.reference_causal_lm import GPTForCausalLM
    torch.manual_seed(0)
    models = {"gpt": lambda: GPTForCausalLM(CFG)}
    if importlib.util.find_spec("transformers") is not None:
        import transformers
        cfg = transformers.GPTNeoXConfig(vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=1024, max_position_embeddings=128)
        models["neox"] = lambda: transformers.AutoModelForCausalLM.from_config(cfg)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, CFG.vocab_size, (4, 64), generator=g).to(device)
    labels = ids.clone()
    labels[:, :5] = -100
    for name, make in models.items():
        base = make().to(device)
        ref = _loss_and_norm(copy.deepcopy(base), ids, labels,
                             lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9))
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.shard_model(tsm.transform(copy.deepcopy(base)))
        got = _loss_and_norm(model, ids, labels, lambda m: clip_grad_norm_(m, 1e9))
        logits = got[2]
        _emit({"check": f"vploss:{name}", "loss": got[0], "norm": got[1], "ref_loss": ref[0], "ref_norm": ref[1],
               "logits": type(logits).__name__,
               "local_vocab": (logits.to_local() if isinstance(logits, DTensor) else logits).shape[-1],
               "vocab": logits.shape[-1]})
        del model, base
    if device.type != "cuda":
        return
    # peak memory: one bf16 step of a model whose logits dominate (batch 8 x seq 512 x vocab 32768)
    big = GPTConfig(dim=256, n_layers=2, n_heads=4, vocab_size=32768)
    torch.manual_seed(0)
    base = GPTForCausalLM(big).to(device)
    ids = torch.randint(0, big.vocab_size, (8, 512), generator=g).to(device)
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    row: dict = {"check": "vploss:memory", "logits_fp32_mib": 8 * 512 * big.vocab_size * 4 / 2**20}
    for on in (True, False):
        local_modules.OPTIONS = local_modules.TPOptions(vocab_parallel_loss=on)
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.shard_model(tsm.transform(copy.deepcopy(base)), mp_policy=bf16)
        model(input_ids=ids, labels=ids).loss.backward()  # warm-up: gradients allocated
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.cuda.synchronize()
        key = "on" if on else "off"
        row[f"{key}_loss"] = float(loss)
        row[f"{key}_peak_mib"] = (torch.cuda.max_memory_allocated() - before) / 2**20
        del model, loss
        torch.cuda.empty_cache()
    local_modules.OPTIONS = local_modules.TPOptions()
    _emit(row)


if __name__ == "__main__":
    main()
