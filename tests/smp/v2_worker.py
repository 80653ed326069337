"""Runs under torchrun (4 ranks, gloo): SMP v2 layouts train like one process on the full batch.

Prints one JSON line per check on rank 0; test_v2_parallel_equivalence.py asserts on them.
"""
from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
from exit_threads import report_at_exit  # the worker's own folder (tests/smp) is sys.path[0]

import smdist_launcher.smp as tsm
from smdist_launcher.smp import checkpoint as smp_ckpt
from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state

CFG = GPTConfig(dim=32, n_layers=3, n_heads=4, vocab_size=64)
BATCH, SEQ, STEPS, LR = 8, 8, 3, 0.5


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    data = []
    for _ in range(STEPS):
        tokens = torch.randint(0, CFG.vocab_size, (BATCH, SEQ + 1), generator=g)
        data.append((tokens[:, :-1], tokens[:, 1:]))
    return data


def reference(model: torch.nn.Module) -> list[float]:
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in batches():
        loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def train(model: torch.nn.Module,
          steps: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[float], torch.optim.Optimizer]:
    st = tsm.state
    per = BATCH // st.dp_size
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in steps:
        sl = slice(st.dp_rank * per, (st.dp_rank + 1) * per)
        loss = lm_loss(model(x[sl]), y[sl])
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=st.rep_rank_process_group)
        losses.append(mean.item() / st.dp_size)
    return losses, opt


def parallel(base: torch.nn.Module, config: dict, ac: bool = False, offload: bool = False):
    reset_state()
    tsm.init(config)
    model = tsm.transform(copy.deepcopy(base))
    if ac:
        tsm.apply_activation_checkpointing(model)
    offloader = None
    if offload:
        offloader = tsm.apply_activation_offloading(model, horizon=1, min_bytes=0)
    tsm.shard_model(model)
    losses, opt = train(model, batches())
    return model, opt, losses, offloader


def emit(**row) -> None:
    if os.environ.get("RANK", "0") == "0":
        print("RESULT " + json.dumps(row), flush=True)


def main() -> None:
    torch.manual_seed(0)
    base = GPT(CFG)
    ref = reference(base)
    emit(check="reference", losses=ref)
    scenarios = {
        "tp2_fsdp2_sp": ({"tensor_parallel_degree": 2}, False, False),
        "hsdp_2x2": ({"hybrid_shard_degree": 2}, False, False),
        "tp2_x_hsdp_rep2": ({"tensor_parallel_degree": 2, "hybrid_shard_degree": 1}, False, False),
        "tp4_ac": ({"tensor_parallel_degree": 4}, True, False),
        "fsdp4_offload": ({}, False, True),
        "tp2_ac_fsdp2": ({"tensor_parallel_degree": 2}, True, False),
    }
    kept = {}
    for name, (config, ac, offload) in scenarios.items():
        model, opt, losses, offloader = parallel(base, config, ac, offload)
        row = {"check": name, "losses": losses, "ref": ref}
        if offloader is not None:
            row["offloaded_bytes"] = offloader.stats["offloaded_bytes"]
        emit(**row)
        kept[name] = (model, opt)

    # Checkpoint written at TP2 x FSDP2 loads into FSDP4 (HSDP 2x2) and into one process.
    ckpt_dir = os.path.join(sys.argv[1], "ckpt_tp2")
    src_model, src_opt = kept["tp2_fsdp2_sp"]
    reset_state()
    tsm.init({"tensor_parallel_degree": 2})
    smp_ckpt.save_model(ckpt_dir, src_model, src_opt, extra={"step": STEPS})
    src_full = {k: v.detach().clone() for k, v in smp_ckpt.full_model_state(src_model).items()}

    reset_state()
    tsm.init({"hybrid_shard_degree": 2})
    dst = tsm.shard_model(tsm.transform(copy.deepcopy(base)))
    dst_opt = torch.optim.SGD(dst.parameters(), lr=LR)
    extra = smp_ckpt.load_model(ckpt_dir, dst, dst_opt, extra={"step": 0})
    dst_full = smp_ckpt.full_model_state(dst)
    diff = max((src_full[k] - dst_full[k]).abs().max().item() for k in src_full)
    emit(check="ckpt_tp2_to_hsdp", max_abs_diff=diff, step=int(extra["step"]))

    single = copy.deepcopy(base)
    if dist.get_rank() == 0:
        import torch.distributed.checkpoint as dcp
        sd = {"model": single.state_dict()}
        dcp.load(sd, checkpoint_id=ckpt_dir, no_dist=True)
        single.load_state_dict(sd["model"])
        diff1 = max((src_full[k] - single.state_dict()[k]).abs().max().item() for k in src_full)
        emit(check="ckpt_tp2_to_single", max_abs_diff=diff1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    report_at_exit()
    main()
