"""Fault rehearsal for a local job (`--inject`): each fault fires at its time into the attempt that runs then.

Times count from the first rank's start of the first attempt; a fault due while no attempt runs (one is ending, the
next is being staged) waits for the next one. A rank fault signals only the process that carries this job's and
this attempt's marker (toolkit/faults.py): never a pid an earlier attempt left in a file. A host it killed is kept
on record per attempt (killed_in): the attempt's diagnosis names it lost whatever exit code its placement reports."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..toolkit.faults import Fault, KilledHost, signal_rank

RETRY_S = 0.5   # how soon a fault due between attempts looks again


@dataclass(frozen=True)
class LiveAttempt:
    """The running attempt, as the injector may touch it."""

    number: int
    host_pids: dict[str, int]                 # each host's process group (the supervisor's child)
    host_ended: Callable[[], bool]            # some host of it has exited: the attempt is ending
    preempt: Callable[[], None]               # stop every host as a spot interruption would
    # How the placement kills a host outright when SIGKILL to its process group is not enough (docker: that group is
    # the docker client; its container would run on). None: SIGKILL to the group.
    kill_host: Callable[[str], None] | None = None


class FaultInjector:
    def __init__(self, job_id: str, faults: list[Fault], note: Callable[[str], None],
                 injected: Callable[[dict[str, Any]], None]) -> None:
        self.job_id = job_id
        self.faults = list(faults)
        self._note = note
        self._injected = injected
        self._clock: float | None = None          # monotonic time of the first rank's start
        self._live: LiveAttempt | None = None
        self._timer: threading.Timer | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._killed: dict[int, KilledHost] = {}   # attempt number -> the host killed in it

    # ---- what the job tells it ----
    def attempt_running(self, live: LiveAttempt) -> None:
        self._live = live

    def attempt_ended(self) -> None:
        self._live = None   # a fault due now waits for the next attempt

    def first_rank_up(self, now: float) -> None:
        """The first rank of the job started: every fault's clock starts here (once)."""
        if self._clock is None:
            self._clock = now
            self._schedule()

    def killed_in(self, attempt: int) -> KilledHost | None:
        """The host a kill-host fault killed in `attempt` (the first one), None when none was."""
        return self._killed.get(attempt)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    # ---- firing ----
    def _schedule(self) -> None:
        if not self.faults or self._clock is None:
            return
        self._arm(max(0.0, self._clock + self.faults[0].at_s - time.monotonic()))

    def _arm(self, delay: float) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        if self._closed.is_set() or not self.faults:
            return
        live = self._live
        if live is None or live.host_ended():
            self._arm(RETRY_S)
            return
        fault = self.faults.pop(0)
        self._note(f"injecting {fault}")
        self._injected({"fault": str(fault), "attempt": live.number, "at": time.time()})
        try:
            self.fire(fault, live)
        except OSError as exc:
            self._note(f"{fault}: {exc}")
        self._schedule()

    def fire(self, fault: Fault, live: LiveAttempt) -> None:
        if fault.kind == "kill-host" and fault.target in live.host_pids:
            # On record before the kill (the attempt may end at once), its time before it: what the host reports
            # after the kill is no cause.
            first = live.number not in self._killed
            self._killed.setdefault(live.number, KilledHost(fault.target, str(fault), time.time()))
            try:
                if live.kill_host is not None:
                    live.kill_host(fault.target)
                else:
                    os.killpg(live.host_pids[fault.target], signal.SIGKILL)
            except OSError:
                if first:
                    del self._killed[live.number]  # nothing was killed
                raise
        elif fault.kind == "preempt":
            live.preempt()
        elif fault.kind in ("kill-rank", "hang-rank") and fault.target is not None:
            signum = signal.SIGKILL if fault.kind == "kill-rank" else signal.SIGSTOP
            if signal_rank(self.job_id, live.number, int(fault.target), signum) is None:
                self._note(f"{fault}: rank {fault.target} is not running; nothing injected")
