"""The seed's MNIST CNN, trained data-parallel (DDP) on the synthetic data of make_data.py.

Runs unchanged under torchrun (torch_distributed), under mpirun (pytorchddp, mpi) and as a
single process. Reads the SageMaker contract: SM_CHANNEL_TRAINING (and SM_CHANNEL_TEST if
given), SM_MODEL_DIR; hyperparameters arrive as --epochs/--batch-size/--lr arguments.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), 1)


def adopt_mpi_environment() -> None:
    """mpirun sets OMPI_COMM_WORLD_*; torch's env:// rendezvous wants RANK/WORLD_SIZE/LOCAL_RANK.
    MASTER_ADDR/MASTER_PORT come from the launch plan's environment in both cases."""
    if "RANK" in os.environ or "OMPI_COMM_WORLD_RANK" not in os.environ:
        return
    os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
    os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
    os.environ["LOCAL_RANK"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    os.environ["LOCAL_WORLD_SIZE"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")


def load(channel: str) -> TensorDataset:
    blob = torch.load(Path(channel) / "data.pt")
    images = blob["images"].float().div_(255.0).sub_(0.1307).div_(0.3081)
    return TensorDataset(images, blob["labels"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    args, _unknown = parser.parse_known_args()

    adopt_mpi_environment()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = world_size > 1
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        # All simulated hosts share this machine's cores: do not oversubscribe them.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    if distributed:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    torch.manual_seed(args.seed)

    train_set = load(os.environ["SM_CHANNEL_TRAINING"])
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed) if distributed else None
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None)
    model: nn.Module = Net().to(device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    if rank == 0:
        print(f"training on {len(train_set)} images, world size {world_size}, device {device.type}", flush=True)

    for epoch in range(1, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        started = time.perf_counter()
        losses = []
        for step, (data, target) in enumerate(loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            if rank == 0 and step % 2 == 0:  # a point of the loss curve (metric_definitions)
                print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f}", flush=True)
        # Loss of the first and last quarter of the epoch, averaged over every rank.
        quarter = max(1, len(losses) // 4)
        summary = torch.stack([torch.stack(losses[:quarter]).mean(), torch.stack(losses[-quarter:]).mean()]).to(device)
        if distributed:
            dist.all_reduce(summary)
            summary /= world_size
        if rank == 0:
            print(f"epoch {epoch}: loss {summary[0].item():.4f} -> {summary[1].item():.4f} "
                  f"({time.perf_counter() - started:.1f} s)", flush=True)

    test_dir = os.environ.get("SM_CHANNEL_TEST")
    if rank == 0 and test_dir:
        test_set = load(test_dir)
        net = model.module if distributed else model
        net.eval()
        with torch.no_grad():
            correct = sum(int((net(x.to(device)).argmax(1) == y.to(device)).sum()) for x, y in DataLoader(test_set, batch_size=256))
        print(f"test accuracy {correct / len(test_set):.4f}", flush=True)
    if rank == 0:
        model_dir = Path(os.environ.get("SM_MODEL_DIR", "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        net = model.module if distributed else model
        torch.save(net.state_dict(), model_dir / "model.pth")
        print(f"saved model to {model_dir / 'model.pth'}", flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
