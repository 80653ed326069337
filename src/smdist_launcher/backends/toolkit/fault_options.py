"""The `inject` option of every backend that rehearses faults (local placements, Slurm): one field, one check."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .faults import Fault, check_targets, parse_fault


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

    def faults_for(self, hosts: list[str], world_size: int, key: str) -> list[Fault]:
        """The faults in firing order; ValidationError (`<key>.inject`) for a host or rank the job does not have."""
        faults = sorted((parse_fault(f) for f in self.inject), key=lambda f: f.at_s)
        problems = check_targets(faults, hosts, world_size)
        if problems:
            from ...errors import ErrorItem, ValidationError

            raise ValidationError([ErrorItem(f"{key}.inject", p) for p in problems])
        return faults
