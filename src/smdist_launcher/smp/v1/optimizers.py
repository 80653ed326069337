"""``smdistributed.modelparallel.torch.optimizers``: SMP's stand-ins for apex's fused optimizers.

They need apex's CUDA kernels; this runtime does not ship apex, so they refuse with a way out."""
from __future__ import annotations

from typing import Any


def _refuse(name: str, alternative: str) -> type:
    class Refused:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError(
                f"smdistributed.modelparallel.torch.optimizers.{name} wraps apex's fused kernels, which this runtime "
                f"does not ship; use {alternative} (wrapped in smp.DistributedOptimizer)")

    Refused.__name__ = Refused.__qualname__ = name
    return Refused


FusedNovoGrad = _refuse("FusedNovoGrad", "a torch.optim optimizer such as torch.optim.AdamW")
FusedLamb = _refuse("FusedLamb", "a torch.optim optimizer such as torch.optim.AdamW")

__all__ = ["FusedLamb", "FusedNovoGrad"]
