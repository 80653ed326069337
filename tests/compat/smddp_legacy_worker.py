"""Runs under torchrun (2 ranks, CPU) with the compat site dir on PYTHONPATH: SMDDP's legacy API through AWS's paths.

Prints one "RESULT {json}" line on rank 0 for test_smddp_legacy.py.
"""
from __future__ import annotations

import copy
import json

import smdistributed.dataparallel.torch.distributed as dist
import torch
import torch.nn.functional as F
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP
from torch import nn

assert dist.is_available() and not dist.is_initialized()
dist.init_process_group()
dist.init_process_group()  # idempotent, as in SMDDP
rank, world = dist.get_rank(), dist.get_world_size()
out: dict = {"backend": dist.get_backend(), "local_rank": dist.get_local_rank(), "local_size": dist.get_local_size()}

t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
out["sum"] = t.item()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.AVERAGE)
out["avg"] = t.item()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True).wait()
out["max"] = t.item()
b = torch.tensor([float(rank * 10)])
dist.broadcast(b, src=1)
out["bcast"] = b.item()
parts = [torch.zeros(1) for _ in range(world)]
dist.all_gather(parts, torch.tensor([float(rank)]))
out["gather"] = [p.item() for p in parts]
a2a = torch.zeros(world)
dist.all_to_all_single(a2a, torch.arange(world, dtype=torch.float32) + 10 * rank)
out["a2a"] = a2a.tolist()
r = torch.tensor([1.0])
dist.reduce(r, dst=0)
out["reduce"] = r.item() if rank == 0 else None
sub = dist.new_group([0, 1])
out["sub_size"] = dist.get_world_size(sub)
dist.barrier()

torch.manual_seed(0)
base = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
ref = copy.deepcopy(base)
g = torch.Generator().manual_seed(1)
x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
model = DDP(base)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
losses, ref_losses = [], []
per = 8 // world
for _step in range(3):
    sl = slice(rank * per, (rank + 1) * per)
    opt.zero_grad()
    loss = F.cross_entropy(model(x[sl]), y[sl])
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVERAGE)
    losses.append(mean.item())
    ref_opt.zero_grad()
    ref_loss = F.cross_entropy(ref(x), y)
    ref_loss.backward()
    ref_opt.step()
    ref_losses.append(ref_loss.item())
with model.no_sync():
    F.cross_entropy(model(x[:2]), y[:2]).backward()
out["losses"], out["ref_losses"] = losses, ref_losses
if rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
del model, sub
dist.destroy_process_group()
