"""The HuggingFace estimator (SageMaker's sagemaker.huggingface.HuggingFace arguments)."""
from __future__ import annotations

from .base import FrameworkEstimator


class HuggingFace(FrameworkEstimator):
    framework = "huggingface"
