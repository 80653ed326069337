"""``torch.sagemaker.utils.utils``: the names SMP scripts import from it (``timeit``)."""
from ..timing import timeit

__all__ = ["timeit"]
