"""Runs under torchrun (4 ranks, gloo): SMP v2 local checkpoints the way AWS documents them (replication groups from
state.ranker.get_rep_groups(), sm_state_dict_type(SM_LOCAL_STATE_DICT), async_save + maybe_finalize_async_calls,
init_optim_state + load into a fresh model). Resuming must reproduce the uninterrupted run's losses exactly, for an
FSDP1 HYBRID_SHARD model and for an FSDP2 (tsm.shard_model) one. argv[1]: a folder every rank shares.
On CUDA (one GPU per rank, NCCL) it runs the same way; with fewer than 4 ranks the model is sharded over all of them."""
from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from exit_threads import report_at_exit  # the worker's own folder (tests/smp) is sys.path[0]
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
from torch.sagemaker import state
from torch.sagemaker.distributed.checkpoint.filesystem import DistributedFileSystemReader
from torch.sagemaker.distributed.checkpoint.state_dict_loader import load
from torch.sagemaker.distributed.checkpoint.state_dict_saver import async_save, maybe_finalize_async_calls
from torch.sagemaker.distributed.checkpoint.state_dict_utils import (
    SMStateDictType,
    init_optim_state,
    sm_state_dict_type,
)

from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state

CFG = GPTConfig(dim=32, n_layers=2, n_heads=4, vocab_size=64)
BATCH, SEQ = 8, 8


def batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(n):
        tokens = torch.randint(0, CFG.vocab_size, (BATCH, SEQ + 1), generator=g)
        out.append((tokens[:, :-1], tokens[:, 1:]))
    return out


DEVICE = (torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if torch.cuda.is_available()
          else torch.device("cpu"))


def build(base: torch.nn.Module, kind: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = copy.deepcopy(base).to(DEVICE)
    if kind == "fsdp1":
        strategy = ShardingStrategy.HYBRID_SHARD if dist.get_world_size() >= 4 else ShardingStrategy.FULL_SHARD
        model = FSDP(model, sharding_strategy=strategy, use_orig_params=True, device_id=DEVICE)
    else:
        model = tsm.shard_model(tsm.transform(model))
    return model, torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)


def train(model, opt, steps) -> list[float]:
    per = BATCH // state.dp_size
    losses = []
    for x, y in steps:
        sl = slice(state.dp_rank * per, (state.dp_rank + 1) * per)
        loss = lm_loss(model(x[sl].to(DEVICE)), y[sl].to(DEVICE))
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    return losses


def replication_group():
    rank = dist.get_rank()
    mine = None
    for ranks in state.ranker.get_rep_groups():
        group = dist.new_group(ranks)  # every rank creates every group, in the same order
        if rank in ranks:
            mine = (group, ranks)
    return mine[0], min(mine[1])


def scenario(base: torch.nn.Module, kind: str, root: str) -> dict:
    reset_state()
    tsm.init({"hybrid_shard_degree": 2} if dist.get_world_size() >= 4 else {})
    data = batches(4)
    model, opt = build(base, kind)
    first = train(model, opt, data[:2])
    for group in opt.param_groups:
        group["lr"] = 0.02   # a scheduler's change: it must come back with the checkpoint
    shard = model.rank if kind == "fsdp1" else state.ranker.get_shard_rank()
    checkpoint_id = os.path.join(root, kind, f"tp{state.tp_rank}_ep{state.ep_rank}_fsdp{shard}")
    rep_group, coordinator = replication_group()
    maybe_finalize_async_calls(blocking=True, process_group=rep_group)
    with sm_state_dict_type(model, SMStateDictType.SM_LOCAL_STATE_DICT):
        state_dict = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    async_save(state_dict, checkpoint_id=checkpoint_id, process_group=rep_group, coordinator_rank=coordinator)
    maybe_finalize_async_calls(blocking=True, process_group=rep_group)
    uninterrupted = train(model, opt, data[2:])

    fresh, fresh_opt = build(base, kind)   # initial weights, lr 0.05, no optimizer state
    with sm_state_dict_type(fresh, SMStateDictType.SM_LOCAL_STATE_DICT):
        loaded = {"model": fresh.state_dict()}
        init_optim_state(fresh_opt, skip_empty_param=True)
        loaded["optimizer"] = fresh_opt.state_dict()
    load(state_dict=loaded, process_group=rep_group, coordinator_rank=coordinator,
         storage_reader=DistributedFileSystemReader(checkpoint_id))
    resumed = train(fresh, fresh_opt, data[2:])
    return {"check": kind, "first": first, "uninterrupted": uninterrupted, "resumed": resumed,
            "lr": fresh_opt.param_groups[0]["lr"], "files": sorted(os.listdir(checkpoint_id))}


def main() -> None:
    torch.manual_seed(0)
    if DEVICE.type == "cuda":
        torch.cuda.set_device(DEVICE)
    dist.init_process_group("nccl" if DEVICE.type == "cuda" else "gloo")
    base = GPT(CFG)
    for kind in ("fsdp1", "fsdp2"):
        row = scenario(base, kind, sys.argv[1])
        if dist.get_rank() == 0:
            print("RESULT " + json.dumps(row), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    report_at_exit()
    main()
