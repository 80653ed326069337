"""SMP v2's ``torch.sagemaker.distributed.checkpoint``: DCP save/load under SMP's module names."""
from . import async_utils, filesystem, state_dict_loader, state_dict_saver

__all__ = ["async_utils", "filesystem", "state_dict_loader", "state_dict_saver"]
