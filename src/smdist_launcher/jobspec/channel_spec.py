"""The schema of one fit() input channel (inputs.py validates with it). Its own module: inputs.py is imported with the
estimators and stays free of pydantic until the first channel is checked."""
from __future__ import annotations

from typing import Literal

from .strict_model import SpecModel


class ChannelSpec(SpecModel):
    uri: str
    input_mode: Literal["File", "Pipe", "FastFile"] = "File"
    content_type: str | None = None
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = "FullyReplicated"
