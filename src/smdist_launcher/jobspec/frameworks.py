"""The framework names an estimator or a job file can have. No pydantic here: validation's entry points import this."""
from __future__ import annotations

from typing import Literal

Framework = Literal["pytorch", "tensorflow", "huggingface", "mxnet", "framework"]
FRAMEWORKS: tuple[str, ...] = ("pytorch", "tensorflow", "huggingface", "mxnet", "framework")
