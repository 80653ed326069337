"""``torch.sagemaker.tensor_parallel``: the transformer-layer class that SMP's policies select (``transformer``)."""
from . import transformer

__all__ = ["transformer"]
