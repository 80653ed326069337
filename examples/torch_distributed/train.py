"""Minimal torchrun script: RANK/WORLD_SIZE/MASTER_ADDR come from torchrun; hyperparameters arrive as --epochs/--lr."""
import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
args, _ = parser.parse_known_args()
dist.init_process_group()
print(f"rank {dist.get_rank()}/{dist.get_world_size()}: epochs={args.epochs} lr={args.lr}")
