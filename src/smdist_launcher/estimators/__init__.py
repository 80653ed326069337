"""Estimators with SageMaker's constructor arguments: validated at construction, plan() pure, fit() runs the plan."""
from __future__ import annotations

from .base import FrameworkEstimator, estimator_from_job_file
from .framework import Framework
from .huggingface import HuggingFace
from .job_names import name_from_base
from .model_trainer import ModelTrainer
from .mxnet import MXNet
from .pytorch import PyTorch
from .tensorflow import TensorFlow

__all__ = ["Framework", "FrameworkEstimator", "HuggingFace", "MXNet", "ModelTrainer", "PyTorch", "TensorFlow",
           "estimator_from_job_file",
           "name_from_base"]
