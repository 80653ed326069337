"""``smdistributed.modelparallel.torch.patches.checkpoint``: checkpoint / checkpoint_sequential."""
from ..activation_checkpointing import checkpoint, checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential"]
