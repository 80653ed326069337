"""The generic Framework estimator: any training image (image_uri is required)."""
from __future__ import annotations

from .base import FrameworkEstimator


class Framework(FrameworkEstimator):
    framework = "framework"
