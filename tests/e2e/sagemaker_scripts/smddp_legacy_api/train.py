"""A small classifier trained with SMDDP's legacy API, as scripts written for smdistributed-dataparallel <= 1.3 do.

Each rank trains on its shard of the global batch; the script also trains the same network in one process on the
full batch and asserts that the data-parallel loss equals it at every step.
"""
import argparse
import json
import os

import smdistributed.dataparallel.torch.distributed as dist
import torch
import torch.nn as nn
import torch.nn.functional as F
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc1 = nn.Linear(4 * 6 * 6, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.log_softmax(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = dist.get_local_rank()
    global_batch = args.batch_size
    args.batch_size //= world
    args.batch_size = max(args.batch_size, 1)

    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    g = torch.Generator().manual_seed(7)
    images, labels = torch.randn(128, 1, 14, 14, generator=g), torch.randint(0, 10, (128,), generator=g)
    dataset = TensorDataset(images, labels)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(rank)  # different on purpose: DDP must start every replica from rank 0's weights
    net = Net().to(device)
    model = DDP(net)
    torch.manual_seed(0)
    reference = Net()
    reference.load_state_dict({k: v.cpu() for k, v in model.module.state_dict().items()})
    ref_opt = torch.optim.SGD(reference.parameters(), lr=args.lr)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    full = DataLoader(dataset, batch_size=global_batch, shuffle=False)
    steps = 0
    for epoch in range(args.epochs):
        for (x, y), (fx, fy) in zip(loader, full, strict=False):
            optimizer.zero_grad()
            loss = F.nll_loss(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVERAGE)

            ref_opt.zero_grad()
            ref_loss = F.nll_loss(reference(fx), fy)
            ref_loss.backward()
            ref_opt.step()
            assert abs(mean.item() - ref_loss.item()) < 1e-5, (steps, mean.item(), ref_loss.item())
            steps += 1
        if rank == 0:
            print(f"epoch {epoch}: loss {mean.item():.4f} (one-process reference {ref_loss.item():.4f})")

    ranks = torch.zeros(world)
    dist.all_gather(list(ranks.split(1)), torch.tensor([float(rank)]))
    assert ranks.tolist() == list(map(float, range(world)))
    dist.barrier()
    result = {"rank": rank, "world": world, "local_rank": local_rank, "local_size": dist.get_local_size(),
              "steps": steps, "loss": mean.item(), "reference_loss": ref_loss.item()}
    os.makedirs(args.model_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, f"result-{rank}.json"), "w") as f:
        json.dump(result, f)
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(args.model_dir, "model.pt"))


if __name__ == "__main__":
    main()
