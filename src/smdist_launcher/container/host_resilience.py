"""What a host's runtime does about failures by itself (stdlib only: it runs in our image on any engine).

A launcher that watches every host itself (the process, netns and docker backends) keeps hang detection to itself
and only hands the hosts `process_restarts`; engines that cannot watch the ranks (Slurm, SageMaker with our image)
hand them the log monitors too. Either way the settings travel as one environment variable, never in the plan, so
pinned plans do not change."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .hang_detector import Monitor

RESILIENCE_ENV = "SMDIST_RESILIENCE"
# The runtime's hang check: how often it looks (a hang is reported within expected_every_s + this).
CHECK_EVERY_S = 1.0


@dataclass(frozen=True)
class HostResilience:
    process_restarts: int = 0           # the ranks restart in place this often before the host fails
    monitors: list[Monitor] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return bool(self.process_restarts or self.monitors)

    def encode(self) -> str:
        return json.dumps({"process_restarts": self.process_restarts,
                           "log_monitoring": [asdict(m) for m in self.monitors]}, sort_keys=True)


def decode(value: str | None) -> HostResilience:
    """The settings from the environment; none (or unreadable: never a reason to fail a job) → nothing to do."""
    if not value:
        return HostResilience()
    try:
        raw = json.loads(value)
        monitors = [Monitor(str(m["name"]), str(m["pattern"]), float(m["expected_every_s"]),
                            float(m.get("start_after_s") or 0.0)) for m in raw.get("log_monitoring") or []]
        return HostResilience(int(raw.get("process_restarts") or 0), monitors)
    except (ValueError, TypeError, KeyError, AttributeError):
        return HostResilience()
