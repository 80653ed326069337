"""The `resilience:` key of a job (also an estimator argument): what a failed attempt does next, and how a hang is seen.

`max_retry_attempts` (SageMaker's own argument) says how many attempts a job gets; this says which failures they are
spent on, whether ranks restart in place first (HyperPod's process restarts before a full job restart, torchrun's
--max-restarts), and which log lines prove progress (HyperPod's logMonitoringConfiguration)."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .strict_model import SpecModel

# What a retry can cure: the failure came from outside the script (a killed host or rank, a lost host, a hang, a
# rendezvous or collective timeout, a spot interruption). `any` retries a Python exception in the script too.
RetryOn = Literal["curable", "any"]


class LogMonitor(SpecModel):
    """A line that proves progress: when no rank prints a match for `expected_every_s` seconds (counted after
    `start_after_s` from the first rank's start), the attempt is hung. A pattern with a group captures the step."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    pattern: str = Field(min_length=1, max_length=512)
    expected_every_s: float = Field(gt=0, le=7 * 24 * 3600)
    start_after_s: float = Field(default=0, ge=0, le=7 * 24 * 3600)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a regular expression ({exc}); e.g. 'step (\\d+)'") from None
        if compiled.groups > 1:
            raise ValueError("may capture one group (the step number), not "
                             f"{compiled.groups}; make the others non-capturing: (?:...)")
        return value

    @property
    def captures_step(self) -> bool:
        return re.compile(self.pattern).groups == 1


class Resilience(SpecModel):
    retry_on: RetryOn = "curable"
    # restarts of the ranks in place (the hosts stay up, torchrun --max-restarts) before the attempt fails; which
    # launchers can do it is a rule of the distribution (rules/combinations.py)
    process_restarts: int = Field(default=0, ge=0, le=100)
    log_monitoring: list[LogMonitor] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _unique_names(self) -> Resilience:
        names = [m.name for m in self.log_monitoring]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"log_monitoring names must be unique; {', '.join(duplicates)} appear more than once")
        return self
