"""A regression MLP with the SMDDP backend as AWS documents it since library v1.4 (torch's DDP, backend "smddp").

Checks the collectives the backend serves (all_reduce with AVG, all_gather_into_tensor, reduce_scatter_tensor,
broadcast) and asserts the data-parallel loss equals a one-process reference on the full batch at every step.
"""
import argparse
import copy
import json
import os

import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  (registers the "smddp" backend)
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="smddp")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    assert dist.get_backend() == "smddp"

    device = torch.device("cpu")
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)

    t = torch.full((2,), float(rank), device=device)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.allclose(t, torch.full((2,), (world - 1) / 2, device=device))
    gathered = torch.empty(world * 2, device=device)
    dist.all_gather_into_tensor(gathered, torch.full((2,), float(rank), device=device))
    assert gathered.tolist() == [float(r) for r in range(world) for _ in range(2)]
    scattered = torch.empty(1, device=device)
    dist.reduce_scatter_tensor(scattered, torch.arange(world, dtype=torch.float32, device=device))
    assert scattered.item() == float(rank * world)
    seed = torch.tensor([1234 if rank == 0 else 0], device=device)
    dist.broadcast(seed, src=0)

    torch.manual_seed(int(seed.item()))
    net = nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.Linear(16, 1)).to(device)
    reference = copy.deepcopy(net).cpu()
    model = DDP(net, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=args.lr)

    per = args.batch_size // world
    g = torch.Generator().manual_seed(5)
    losses = []
    for step in range(args.steps):
        x, y = torch.randn(args.batch_size, 5, generator=g), torch.randn(args.batch_size, 1, generator=g)
        xs, ys = x[rank * per:(rank + 1) * per].to(device), y[rank * per:(rank + 1) * per].to(device)
        optimizer.zero_grad()
        loss = F.mse_loss(model(xs), ys)
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        ref_opt.zero_grad()
        ref_loss = F.mse_loss(reference(x), y)
        ref_loss.backward()
        ref_opt.step()
        assert abs(mean.item() - ref_loss.item()) < 1e-5, (step, mean.item(), ref_loss.item())
        losses.append(mean.item())
    if rank == 0:
        print(f"smddp backend: {args.steps} steps, final loss {losses[-1]:.5f} equals the one-process reference")
    out = os.environ["SM_MODEL_DIR"]
    with open(os.path.join(out, f"result-{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "backend": dist.get_backend(), "losses": losses}, f)
    dist.barrier()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
