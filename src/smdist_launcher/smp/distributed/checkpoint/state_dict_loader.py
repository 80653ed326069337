"""``torch.sagemaker.distributed.checkpoint.state_dict_loader``: load (reshards into the current layout)."""
from ...dcp_io import load

__all__ = ["load"]
