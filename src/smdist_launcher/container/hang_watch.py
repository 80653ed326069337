"""Log monitoring inside a host's runtime (engines whose launcher cannot watch the ranks: Slurm, SageMaker with our
image): the ranks' lines go to a HangDetector, a thread asks it every second, and the first hang is handed to the
runtime once. The detector decides; the runtime stops its ranks and records the hang."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .hang_detector import Hang, HangDetector, Monitor
from .host_resilience import CHECK_EVERY_S


class HangWatch:
    def __init__(self, monitors: list[Monitor], ranks: list[int], on_hang: Callable[[Hang], None]) -> None:
        self.detector = HangDetector(monitors, ranks)
        self.hang: Hang | None = None
        self._on_hang = on_hang
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="smdist-hang-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def host_started(self) -> None:
        """The host's launcher started (its ranks may print nothing for a while)."""
        self.detector.host_started(time.monotonic())

    def restarted(self) -> None:
        """The ranks start again in place: the monitors' clocks start over."""
        self.detector.restarted(time.monotonic())

    def line(self, rank: int | None, text: str) -> None:
        now = time.monotonic()
        if rank is not None:  # the monitors' clocks begin with the first rank's first line, as the launcher's do
            self.detector.started(now)
        self.detector.line(rank, text, now)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            hang = self.detector.check(time.monotonic())
            if hang is not None:
                self.hang = hang
                self._on_hang(hang)
                return


def hang_message(hang: Hang) -> str:
    """One line, as failure reasons show it (the same words the local launcher uses)."""
    ranks = ", ".join(map(str, hang.stuck_ranks)) or "unknown"
    return (f"hang: no line matched log monitor {hang.monitor!r} for {hang.silent_for_s:.0f} s "
            f"(quietest: rank(s) {ranks})")
