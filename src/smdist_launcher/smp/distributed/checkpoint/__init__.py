"""SMP v2's ``torch.sagemaker.distributed.checkpoint``: DCP save/load under SMP's module names."""
from . import state_dict_loader, state_dict_saver

__all__ = ["state_dict_loader", "state_dict_saver"]
