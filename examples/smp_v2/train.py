"""Minimal SMP v2 script: torch.sagemaker reads the SMP config the launcher put in SM_HP_MP_PARAMETERS."""
import torch.distributed as dist
import torch.sagemaker as tsm

dist.init_process_group()
tsm.init()
print(f"rank {dist.get_rank()}: tensor parallel degree {tsm.state.tp_size}")
