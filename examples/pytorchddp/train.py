"""Minimal DDP script under mpirun: ranks come from Open MPI, the master address from MASTER_ADDR/MASTER_PORT."""
import os

import torch.distributed as dist

rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("nccl", rank=rank, world_size=world)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} on {os.environ.get('SM_CURRENT_HOST')}")
