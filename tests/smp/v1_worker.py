"""Runs under torchrun (4 ranks, gloo): SMP v1 layouts train like one process on the full batch.

Prints one "RESULT {json}" line per check on rank 0; test_v1_parallel_equivalence.py asserts on them.
"""
from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from exit_threads import report_at_exit  # the worker's own folder (tests/smp) is sys.path[0]
from torch import nn

import smdist_launcher.smp.v1 as smp

GLOBAL_BATCH, STEPS, LR = 16, 3, 0.2


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(12, 32)
        self.l2 = nn.Linear(32, 32)
        self.l3 = nn.Linear(32, 24)
        self.l4 = nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.l1(x))
        x = F.relu(self.l2(x))
        x = torch.tanh(self.l3(x))
        return F.log_softmax(self.l4(x), 1)


def data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(GLOBAL_BATCH, 12, generator=g), torch.randint(0, 10, (GLOBAL_BATCH,), generator=g))
            for _ in range(STEPS)]


def reference(base: nn.Module) -> list[float]:
    model = copy.deepcopy(base)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    out = []
    for x, y in data():
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


@smp.step
def train_step(model, x, y):
    output = model(x)
    loss = F.nll_loss(output, y)
    model.backward(loss)
    return output, loss


def run(base: nn.Module, config: dict, tp_modules: tuple[str, ...] = (), use_step: bool = True):
    smp.init(config)
    net = copy.deepcopy(base)
    for name in tp_modules:
        smp.set_tensor_parallelism(net.get_submodule(name), True)
    model = smp.DistributedModel(net)
    opt = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR))
    per = GLOBAL_BATCH // smp.dp_size()
    losses = []
    for x, y in data():
        sl = slice(smp.dp_rank() * per, (smp.dp_rank() + 1) * per)
        opt.zero_grad()
        if use_step:
            outputs, loss_mb = train_step(model, x[sl], y[sl])
            loss = loss_mb.reduce_mean()
            assert outputs.concat().shape == (per, 10)
        else:
            loss = F.nll_loss(model(x[sl]), y[sl])
            loss.backward()
        opt.step()
        mean = loss.detach().reshape(1).clone()
        dist.all_reduce(mean, group=smp.get_dp_process_group())
        losses.append(mean.item() / smp.dp_size())
    return model, losses


def emit(**row) -> None:
    if os.environ.get("RANK", "0") == "0":
        print("RESULT " + json.dumps(row), flush=True)


def main() -> None:
    torch.manual_seed(0)
    base = Net()
    ref = reference(base)
    emit(check="reference", losses=ref)
    scenarios = {
        "tp2_ddp_no_step": ({"tensor_parallel_degree": 2, "ddp": True}, ("l2", "l3"), False),
        "tp4_mb2": ({"tensor_parallel_degree": 4, "ddp": True, "microbatches": 2}, ("l1", "l2", "l3", "l4"), True),
        "pp2_simple_mb2": ({"pipeline_parallel_degree": 2, "ddp": True, "microbatches": 2, "pipeline": "simple"},
                           (), True),
        "pp2_interleaved_mb4": ({"pipeline_parallel_degree": 2, "ddp": True, "microbatches": 4}, (), True),
        "pp2_tp2_mb4_spread": ({"pipeline_parallel_degree": 2, "tensor_parallel_degree": 2, "ddp": True,
                                "microbatches": 4, "placement_strategy": "spread"}, ("l2",), True),
    }
    models = {}
    for name, (config, tp_modules, use_step) in scenarios.items():
        model, losses = run(base, config, tp_modules, use_step)
        emit(check=name, losses=losses, ref=ref)
        models[name] = model
    # Groups of the last (spread) layout: sizes and an object broadcast/allgather over them.
    smp.mp_barrier()
    smp.dp_barrier()
    sizes = {g.name: dist.get_world_size(smp.comm.process_group(g)) for g in smp.CommGroup}
    gathered = smp.allgather(smp.rank(), smp.MP_GROUP)
    emit(check="groups", sizes=sizes, mp_members=sorted(gathered), ranks=[smp.pp_size(), smp.tp_size(), smp.dp_size(),
                                                                            smp.rdp_size(), smp.mp_size()])

    # Full (partial=False) save from TP=4 loads into one process; partial save round-trips per rank.
    out_dir = sys.argv[1]
    smp.init({"tensor_parallel_degree": 4, "ddp": True, "microbatches": 2})
    tp_model = models["tp4_mb2"]
    smp.state.model = tp_model
    smp.save(tp_model.state_dict(), os.path.join(out_dir, "full.pt"), partial=False)
    smp.save(tp_model.state_dict(), os.path.join(out_dir, "part.pt"), partial=True)
    mine = {k: v.to_local().clone() for k, v in tp_model.state_dict().items()}
    fresh_net = copy.deepcopy(base)
    smp.set_tensor_parallelism(fresh_net, True)
    fresh = smp.DistributedModel(fresh_net)
    fresh.load_state_dict(smp.load(os.path.join(out_dir, "part.pt"), partial=True))
    diff_partial = max((fresh.state_dict()[k].to_local() - mine[k]).abs().max().item() for k in mine)
    fresh.load_state_dict(smp.load(os.path.join(out_dir, "full.pt"), partial=False))
    diff_full_tp = max((fresh.state_dict()[k].to_local() - mine[k]).abs().max().item() for k in mine)
    emit(check="ckpt_partial_roundtrip", max_abs_diff=diff_partial)
    emit(check="ckpt_full_into_tp", max_abs_diff=diff_full_tp)
    x, y = data()[0]
    tp_loss = F.nll_loss(fresh(x), y).item()
    if dist.get_rank() == 0:
        single = copy.deepcopy(base)
        single.load_state_dict(torch.load(os.path.join(out_dir, "full.pt")))
        emit(check="ckpt_full_into_single", loss=F.nll_loss(single(x), y).item(), tp_loss=tp_loss)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    report_at_exit()
    main()
