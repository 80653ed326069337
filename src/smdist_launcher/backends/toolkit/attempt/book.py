"""The attempt records of one job: numbered here, kept in memory and written whole through one save callback.

The number of the running attempt is never read back from job.json: a reader that saves the record meanwhile (a
launcher refreshing a Slurm job's state) cannot make the loop lose or repeat an attempt."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...phases import Phase
from ..restart_policy import Cause, Decision


@dataclass
class AttemptEnd:
    """How one attempt ended, as the restart policy and the record see it."""

    cause: Cause
    reason: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)   # more for its record (restored checkpoints, first steps)


SaveAttempts = Callable[[list[dict[str, Any]]], None]


class AttemptBook:
    def __init__(self, save: SaveAttempts, entries: list[dict[str, Any]] | None = None) -> None:
        self._save = save
        self.entries: list[dict[str, Any]] = list(entries or [])
        self.number = len(self.entries)   # the running attempt (0 before the first)
        self._times: dict[str, float] = {}

    def begin(self) -> int:
        """A new attempt starts (staging): its number."""
        self.number += 1
        self._times = {"started": time.time()}
        return self.number

    def mark(self, phase: Phase) -> None:
        """When the running attempt entered `phase` (its hosts were started: running), kept with its record."""
        self._times[phase.value] = time.time()

    def end(self, ended: AttemptEnd, decision: Decision) -> dict[str, Any]:
        """The running attempt ended: its record (cause, reason, the restart policy's decision, its times), saved."""
        entry: dict[str, Any] = {"attempt": self.number, "cause": ended.cause.value, "reason": ended.reason or None,
                                 "decision": decision.action, "why": decision.why, **ended.facts,
                                 # wall-clock times: staging began, the hosts were started, the attempt ended
                                 **{k: round(v, 3) for k, v in self._times.items()}, "ended": round(time.time(), 3)}
        self.entries.append(entry)
        self._save(list(self.entries))
        return entry

    def annotate(self, number: int, **facts: Any) -> None:
        """More facts for attempt `number`'s record (where its trees were kept), saved."""
        for entry in self.entries:
            if entry["attempt"] == number:
                entry.update(facts)
        self._save(list(self.entries))
