"""The `inject` option of every backend that rehearses faults (local placements, Slurm): one field, one check."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .faults import parse_fault


class FaultOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    inject: list[str] = Field(default_factory=list, description="faults to rehearse: FAULT@SECONDS (kill-host:algo-N, "
                                                                "kill-rank:R, hang-rank:R, preempt)")

    @field_validator("inject")
    @classmethod
    def _faults(cls, values: list[str]) -> list[str]:
        for value in values:
            parse_fault(value)  # ValueError saying what is allowed
        return values
