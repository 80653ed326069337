"""SMP v2's ``torch.sagemaker.distributed.checkpoint``: DCP save/load under SMP's module names."""
from . import filesystem, state_dict_loader, state_dict_saver

__all__ = ["filesystem", "state_dict_loader", "state_dict_saver"]
