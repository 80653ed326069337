"""What `smdist init` writes: a training script, its job file and a small data set, as a new user's first job."""
from __future__ import annotations

import random

TRAIN_PY = '''\
"""A starter training script (written by `smdist init`): a small model trained with DistributedDataParallel.

It runs the same in local mode and on SageMaker: hyperparameters arrive as command-line flags, the training
channel's files in $SM_CHANNEL_TRAINING, and what is saved in $SM_MODEL_DIR becomes model.tar.gz.
Replace the model and the data loading with yours; keep the parts marked SageMaker."""
import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)  # SageMaker: job.yaml's hyperparameters
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    # torchrun (distribution: torch_distributed) sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")

    # SageMaker: the training channel's files
    lines = (Path(os.environ["SM_CHANNEL_TRAINING"]) / "data.csv").read_text().split()
    data = torch.tensor([[float(v) for v in line.split(",")] for line in lines])
    mine = data[rank::world]  # each rank trains on its own share
    x, y = mine[:, :-1].to(device), mine[:, -1:].to(device)

    model = DistributedDataParallel(torch.nn.Linear(x.shape[1], 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP averages the gradients of all ranks here
        optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}: loss {loss.item():.4f} (world size {world})", flush=True)

    if rank == 0:  # SageMaker: what is in SM_MODEL_DIR becomes model.tar.gz
        torch.save(model.module.state_dict(), Path(os.environ["SM_MODEL_DIR"]) / "model.pth")
        print("saved model.pth", flush=True)
    dist.barrier()
    del model, optimizer  # free what holds the process group before it goes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

JOB_YAML = '''\
# A job file (written by `smdist init`): the estimator's arguments, as PyTorch(...) takes them.
#   smdist validate job.yaml     checks everything, starts nothing
#   smdist plan job.yaml         the exact commands each host would run
#   smdist run job.yaml          runs it here (local mode); jobs are listed by `smdist jobs`
framework: pytorch
base_job_name: starter
entry_point: train.py           # add `source_dir: .` when train.py imports your other files
instance_type: local            # this machine; e.g. ml.g5.12xlarge on SageMaker (inputs then s3://...)
instance_count: 2               # hosts (simulated here, each with its own /opt/ml)
framework_version: "2.3"
py_version: py311
hyperparameters:
  epochs: 5
  lr: 0.1
distribution:
  torch_distributed:
    enabled: true               # torchrun on every host
  mpi:
    processes_per_host: 1       # processes per host (torchrun's --nproc_per_node)
inputs:
  training: data/train          # relative to this file's folder; becomes $SM_CHANNEL_TRAINING
'''

DATA_ROWS = 256
_WEIGHTS = (0.5, -1.0, 2.0, 0.25)


def data_csv(seed: int = 0) -> str:
    """A small regression data set, y = x·w + noise: four features and the target per line."""
    rng = random.Random(seed)
    rows = []
    for _ in range(DATA_ROWS):
        x = [rng.uniform(-1, 1) for _ in _WEIGHTS]
        y = sum(a * b for a, b in zip(x, _WEIGHTS, strict=True)) + rng.gauss(0, 0.05)
        rows.append(",".join(f"{v:.5f}" for v in (*x, y)))
    return "\n".join(rows) + "\n"


def starter_files() -> dict[str, str]:
    """Relative path → content."""
    return {"train.py": TRAIN_PY, "job.yaml": JOB_YAML, "data/train/data.csv": data_csv()}
