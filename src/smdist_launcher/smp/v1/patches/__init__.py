"""``smdistributed.modelparallel.torch.patches``: only ``checkpoint`` exists in SMP's documented API."""
from . import checkpoint

__all__ = ["checkpoint"]
