"""The TensorFlow estimator (SageMaker's sagemaker.tensorflow.TensorFlow arguments)."""
from __future__ import annotations

from .base import FrameworkEstimator


class TensorFlow(FrameworkEstimator):
    framework = "tensorflow"
