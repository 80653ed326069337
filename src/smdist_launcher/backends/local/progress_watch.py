"""The progress watch of a local job: every rank line goes to the hang detector; once a second, while an attempt
runs, stragglers are noted and a hang ends the attempt (its stacks dumped by the supervisor's stop)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ...container.hang_detector import Hang, HangDetector, Monitor

CHECK_S = 1.0


class ProgressWatch:
    def __init__(self, monitors: list[Monitor], ranks: list[int], *, on_stragglers: Callable[[dict[str, list[int]]],
                 None], on_hang: Callable[[Hang], None]) -> None:
        self.monitors = list(monitors)
        self.ranks = list(ranks)
        self._on_stragglers = on_stragglers
        self._on_hang = on_hang
        self.detector: HangDetector | None = None
        self.hang: Hang | None = None
        self._stragglers: dict[str, list[int]] = {}
        self._running = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="smdist-progress", daemon=True)

    def start(self) -> None:
        if self.monitors:
            self._thread.start()

    def close(self) -> None:
        self._done.set()

    # ---- an attempt's course ----
    def attempt_staged(self) -> None:
        """A new attempt: a fresh detector, no hang."""
        self._running = False
        self.hang = None
        self.detector = HangDetector(self.monitors, self.ranks)

    def hosts_started(self, now: float | None = None) -> None:
        """The hosts run: a rank that prints nothing within start_after_s (rendezvous, NCCL init) is silent from
        here."""
        self._running = True
        if self.detector is not None:
            self.detector.host_started(time.monotonic() if now is None else now)

    def attempt_ended(self) -> None:
        self._running = False

    def first_rank_up(self, now: float) -> None:
        """Every monitor's clock starts with the attempt's first rank."""
        if self.detector is not None:
            self.detector.started(now)

    def line(self, rank: int | None, text: str, now: float | None = None) -> None:
        detector = self.detector
        if detector is not None:
            detector.line(rank, text, time.monotonic() if now is None else now)

    def first_steps(self) -> dict[str, int]:
        return self.detector.first_steps() if self.detector else {}

    # ---- the check ----
    def check(self, now: float) -> Hang | None:
        """One round: stragglers changed are reported; the first hang of the attempt is reported and returned."""
        detector = self.detector
        if detector is None or not self._running:
            return None
        laggards = detector.all_stragglers()
        if laggards != self._stragglers:
            self._stragglers = laggards
            self._on_stragglers(laggards)
        hang = detector.check(now)
        if hang is not None and self.hang is None:
            self.hang = hang
            self._on_hang(hang)
            return hang
        return None

    def _watch(self) -> None:
        while not self._done.wait(CHECK_S):
            self.check(time.monotonic())
