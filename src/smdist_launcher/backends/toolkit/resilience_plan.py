"""What a job's attempts follow, read once from its submission: every backend that retries uses this."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ...container.hang_detector import Monitor
from ...container.host_resilience import HostResilience
from ..api import RunPolicy

# The attempt a host runs (1 for the first): the script may read it, e.g. to log a resumption.
ATTEMPT_ENV = "SMDIST_ATTEMPT"


@dataclass(frozen=True)
class ResiliencePlan:
    max_attempts: int = 1           # SageMaker's max_retry_attempts (how many times the job may start); 1 without it
    retry_on: str = "curable"
    use_spot: bool = False
    monitors: list[Monitor] = field(default_factory=list)
    process_restarts: int = 0       # the hosts' runtimes restart their ranks in place this often

    def to_json(self) -> str:
        """For backends whose attempt loop runs elsewhere (Slurm's batch script reads it from the job folder)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResiliencePlan:
        raw = json.loads(text)
        return cls(max_attempts=int(raw["max_attempts"]), retry_on=str(raw["retry_on"]), use_spot=bool(raw["use_spot"]),
                   monitors=[Monitor(**m) for m in raw.get("monitors") or []],
                   process_restarts=int(raw.get("process_restarts") or 0))

    def for_hosts(self, *, watch_logs: bool) -> HostResilience:
        """What each host's runtime does itself: process restarts always; log monitoring only where the launcher
        cannot watch the ranks' lines (watch_logs: Slurm, SageMaker with our image)."""
        return HostResilience(self.process_restarts, list(self.monitors) if watch_logs else [])


def resilience_of(source: RunPolicy | Any) -> ResiliencePlan:
    """What the attempts follow, from the submission's run policy (a bare plan's: one attempt, no monitoring); validated
    arguments (or None) are read into one first."""
    policy = source if isinstance(source, RunPolicy) else RunPolicy.of(source)
    r = policy.resilience
    monitors = [Monitor(m.name, m.pattern, m.expected_every_s, m.start_after_s) for m in r.log_monitoring]
    return ResiliencePlan(max_attempts=policy.max_retry_attempts or 1, retry_on=r.retry_on,
                          use_spot=policy.use_spot_instances, monitors=monitors, process_restarts=r.process_restarts)
