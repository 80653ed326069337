"""`sagemaker.train.configs` of SageMaker SDK v3, as our strict schemas (jobspec/v3_configs.py)."""
from __future__ import annotations

from ..jobspec.v3_configs import (
    CheckpointConfig,
    Compute,
    InputData,
    InstanceGroup,
    MetricDefinition,
    Networking,
    OutputDataConfig,
    RetryStrategy,
    S3DataSource,
    SourceCode,
    StoppingCondition,
    Tag,
)

__all__ = ["CheckpointConfig", "Compute", "InputData", "InstanceGroup", "MetricDefinition", "Networking",
           "OutputDataConfig", "RetryStrategy", "S3DataSource", "SourceCode", "StoppingCondition", "Tag"]
