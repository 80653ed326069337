"""Minimal Trainium script: torchrun starts one process per NeuronCore; the xla backend comes from torch-neuronx."""
import torch.distributed as dist
import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" backend

dist.init_process_group("xla")
print(f"rank {dist.get_rank()}/{dist.get_world_size()}")
