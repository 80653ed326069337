"""The PyTorch estimator (SageMaker's sagemaker.pytorch.PyTorch arguments)."""
from __future__ import annotations

from .base import FrameworkEstimator


class PyTorch(FrameworkEstimator):
    framework = "pytorch"
