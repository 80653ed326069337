"""``torch.sagemaker.distributed.checkpoint.state_dict_loader``: load (reshards into the current layout)."""
from ...checkpoint import load

__all__ = ["load"]
