"""A job's input channel once resolved: its URI and how SageMaker delivers it. The plan holds these (plan/model.py)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Channel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str
    input_mode: Literal["File", "Pipe", "FastFile"] = "File"
    content_type: str | None = None
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = "FullyReplicated"
