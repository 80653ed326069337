"""`sagemaker.train.distributed` of SageMaker SDK v3: Torchrun, MPI, SMP, as our strict schemas."""
from __future__ import annotations

from ..jobspec.v3_configs import MPI, SMP, Torchrun

__all__ = ["MPI", "SMP", "Torchrun"]
