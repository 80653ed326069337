"""Minimal SMDDP script: the smddp process-group backend, one all_reduce, rank 0 reports the sum."""
import torch
import torch.distributed as dist
import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401  registers the "smddp" backend

dist.init_process_group(backend="smddp")
t = torch.ones(1, device="cuda") * dist.get_rank()
dist.all_reduce(t)
if dist.get_rank() == 0:
    print(f"world {dist.get_world_size()}: sum of ranks {int(t.item())}")
