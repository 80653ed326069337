"""SageMaker SDK v3's training names at the same module paths under `smdist_launcher` (`sagemaker.train` →
`smdist_launcher.train`), so v3 code switches by its imports alone:

    from smdist_launcher.train.model_trainer import ModelTrainer, Mode      # sagemaker.train.model_trainer
    from smdist_launcher.train.configs import SourceCode, Compute, InputData, StoppingCondition
    from smdist_launcher.train.distributed import Torchrun, MPI, SMP

Our classes are strict schemas (jobspec/v3_configs.py); ModelTrainer also takes v3's own objects (read by shape).
Not a compat shim: compat/ serves AWS's module paths inside training containers; this is the SDK-facing API.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..estimators.model_trainer import ModelTrainer as ModelTrainer

__all__ = ["ModelTrainer"]


def __getattr__(name: str) -> Any:
    if name == "ModelTrainer":  # lazily, like the package root: importing a submodule must not load the estimators
        from ..estimators.model_trainer import ModelTrainer

        return ModelTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
