"""What a job's attempts follow, read once from its submission: every backend that retries uses this."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...container.hang_detector import Monitor

# The attempt a host runs (1 for the first): the script may read it, e.g. to log a resumption.
ATTEMPT_ENV = "SMDIST_ATTEMPT"


@dataclass(frozen=True)
class ResiliencePlan:
    max_attempts: int = 1           # SageMaker's max_retry_attempts (how many times the job may start); 1 without it
    retry_on: str = "curable"
    use_spot: bool = False
    monitors: list[Monitor] = field(default_factory=list)


def resilience_of(settings: Any) -> ResiliencePlan:
    """From the validated arguments (a bare plan, settings None: one attempt, no monitoring)."""
    if settings is None:
        return ResiliencePlan()
    r = getattr(settings, "resilience", None)
    monitors = [Monitor(m.name, m.pattern, m.expected_every_s, m.start_after_s)
                for m in (r.log_monitoring if r else [])]
    return ResiliencePlan(max_attempts=settings.max_retry_attempts or 1, retry_on=r.retry_on if r else "curable",
                          use_spot=bool(settings.use_spot_instances),
                          monitors=monitors)
