"""SMDDP's legacy ``smdistributed.dataparallel.torch.parallel`` package (re-exports DistributedDataParallel)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
