"""`sagemaker.train.model_trainer` of SageMaker SDK v3: ModelTrainer and Mode."""
from __future__ import annotations

from ..estimators.model_trainer import ModelTrainer
from ..jobspec.v3_configs import Mode

__all__ = ["Mode", "ModelTrainer"]
