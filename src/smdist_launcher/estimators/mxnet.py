"""The MXNet estimator (SageMaker's sagemaker.mxnet.MXNet arguments)."""
from __future__ import annotations

from .base import FrameworkEstimator


class MXNet(FrameworkEstimator):
    framework = "mxnet"
