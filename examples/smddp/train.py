"""SMDDP's two-line change (seed: "import torch_smddp" + backend="smddp") on CPU or GPU.

One all_reduce whose sum every rank checks, then a few DDP steps on random data; rank 0 prints
the sum and the loss. Run under mpirun + smddprun (distribution pytorchddp or smdistributed.dataparallel).
"""
import gc
import os

import torch
import torch.distributed as dist
import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  registers the "smddp" backend
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 3


def main() -> None:
    dist.init_process_group(backend="smddp")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)
    expected = world * (world - 1) / 2
    if total.item() != expected:
        raise SystemExit(f"rank {rank}: all_reduce sum {total.item()} != {expected}")
    if rank == 0:
        print(f"world {world}: sum of ranks {int(total.item())}", flush=True)

    model = DDP(torch.nn.Linear(16, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(STEPS):
        x = torch.randn(32, 16, generator=g).to(device)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    # Replicas stay identical after the steps: DDP averaged the gradients through smddp.
    weights = model.module.weight.detach().clone()
    gathered = [torch.empty_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    if not all(torch.equal(w, weights) for w in gathered):
        raise SystemExit(f"rank {rank}: replicas diverged")
    dist.barrier()
    # Release everything that holds the process group (DDP does) before the interpreter shuts down: gloo's
    # worker threads are joined when the group is freed, not in the middle of finalization (pytorch#190489).
    del model, optimizer
    dist.destroy_process_group()
    gc.collect()


if __name__ == "__main__":
    main()
