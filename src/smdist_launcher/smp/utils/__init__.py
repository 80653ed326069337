"""``torch.sagemaker.utils``: ``utils`` (timeit) and ``process_group_utils`` (ranks of a group)."""
from . import process_group_utils, utils

__all__ = ["process_group_utils", "utils"]
