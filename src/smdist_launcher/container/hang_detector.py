"""Hang and stall detection from the ranks' output (HyperPod's log monitoring). Pure and stdlib only (it runs inside
our image too, where the runtime has no pydantic): lines and the clock come in, decisions go out; the job's loop dumps
stacks and ends the attempt when told.

A monitor is hung when no rank printed a line matching its pattern for `expected_every_s`, counted from the last
match, or before the first one from `start_after_s` after the first rank started (HyperPod's start cut-off: the grace
covers model loading up to the first match, not the gaps after it). When no rank printed anything within
`start_after_s` of the host's start (stuck in rendezvous or NCCL init), the clock counts from the host's start. An
in-place process restart (the runtime's restart notice, or `restarted()`) starts every clock again, with its grace.
With a captured step, a rank whose step falls far behind the others' is a straggler, and the first step of each
attempt says where it resumed."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

STRAGGLER_STEPS = 10
# What a host's runtime prints (a host line, no rank) before it starts its ranks again in place (runtime.py): a
# launcher that watches the host's output learns of the restart from it.
PROCESS_RESTART_NOTICE = "restarting them in place"


def process_restart_notice(exit_code: int, restart: int, restarts: int) -> str:
    """The runtime's line for an in-place process restart (the one definition of its words)."""
    return (f"the ranks failed (exit code {exit_code}): {PROCESS_RESTART_NOTICE} "
            f"(process restart {restart} of {restarts})")


@dataclass(frozen=True)
class Monitor:
    name: str
    pattern: str
    expected_every_s: float
    start_after_s: float = 0.0


@dataclass(frozen=True)
class Hang:
    monitor: str
    silent_for_s: float
    # ranks that never matched, or matched least recently: where to look first
    stuck_ranks: list[int]
    last_steps: dict[int, int]


@dataclass
class _State:
    regex: re.Pattern[str]
    monitor: Monitor
    last_match: float | None = None
    rank_seen: dict[int, float] = field(default_factory=dict)
    rank_step: dict[int, int] = field(default_factory=dict)
    first_step: int | None = None


class HangDetector:
    def __init__(self, monitors: list[Monitor], ranks: list[int]) -> None:
        self.ranks = list(ranks)
        self._states = [_State(re.compile(m.pattern), m) for m in monitors]
        self._started: float | None = None
        self._host_started: float | None = None

    def host_started(self, now: float) -> None:
        """The host (its launcher) started: a rank that never prints within start_after_s is silent from here."""
        if self._host_started is None:
            self._host_started = now

    def started(self, now: float) -> None:
        """The first rank started: the clock of every monitor begins."""
        if self._started is None:
            self._started = now

    def restarted(self, now: float) -> None:
        """The ranks start again in place: every monitor's clock starts over, start_after_s of grace included (a
        restarted rank reloads its model and checkpoint before its first step). Where each attempt resumed stays."""
        self._host_started, self._started = now, None
        for state in self._states:
            state.last_match = None
            state.rank_seen.clear()
            state.rank_step.clear()

    def line(self, rank: int | None, text: str, now: float) -> None:
        if rank is None and PROCESS_RESTART_NOTICE in text:
            self.restarted(now)
            return
        for state in self._states:
            found = state.regex.search(text)
            if found is None:
                continue
            state.last_match = now if state.last_match is None else max(state.last_match, now)
            if rank is None:
                continue
            state.rank_seen[rank] = now
            if state.regex.groups == 1 and found.group(1) is not None:
                try:
                    step = int(found.group(1))
                except ValueError:
                    continue
                state.rank_step[rank] = step
                if state.first_step is None:
                    state.first_step = step

    def check(self, now: float) -> Hang | None:
        """The first monitor whose progress lines stopped coming, or None."""
        for state in self._states:
            m = state.monitor
            start = self._clock_start(m)
            if start is None:
                continue
            if state.last_match is None:  # start_after_s is the grace for the first match
                since = start + m.start_after_s
                if now < since:
                    continue
            else:  # then every line must come within expected_every_s of the last
                since = state.last_match
            if now - since < m.expected_every_s:
                continue
            stuck = sorted(self.ranks, key=lambda r: (state.rank_seen.get(r, float("-inf")), r))
            oldest = state.rank_seen.get(stuck[0]) if stuck else None
            stuck = [r for r in stuck if state.rank_seen.get(r) == oldest]
            return Hang(m.name, now - since, stuck, dict(state.rank_step))
        return None

    def _clock_start(self, m: Monitor) -> float | None:
        """The first rank's start; the host's where no rank started within start_after_s of it (a hang in
        rendezvous or NCCL init prints nothing); None while neither is known."""
        host, rank = self._host_started, self._started
        if host is not None and (rank is None or rank > host + m.start_after_s):
            return host
        return rank

    def first_steps(self) -> dict[str, int]:
        """Each stepped monitor's first step in this attempt (where the attempt resumed)."""
        return {s.monitor.name: s.first_step for s in self._states if s.first_step is not None}

    def first_step(self, name: str) -> int | None:
        """The first step any rank reported in this attempt (where it resumed), None without a captured step."""
        return self.first_steps().get(name)

    def stragglers(self, name: str, behind: int | None = None) -> list[int]:
        """Ranks whose last step is more than `behind` steps behind the furthest rank's (default: 10 steps and a
        tenth of the furthest rank's step, so a rank a step or two late in lockstep training is not one)."""
        state = next((s for s in self._states if s.monitor.name == name), None)
        if state is None or not state.rank_step:
            return []
        top = max(state.rank_step.values())
        limit = behind if behind is not None else max(STRAGGLER_STEPS, top // 10)
        return sorted(r for r, step in state.rank_step.items() if top - step > limit)

    def all_stragglers(self) -> dict[str, list[int]]:
        """Every stepped monitor's stragglers (the default limit), monitors without any left out."""
        found = {s.monitor.name: self.stragglers(s.monitor.name) for s in self._states if s.regex.groups == 1}
        return {name: ranks for name, ranks in found.items() if ranks}


def resume_warning(attempt: int, first_step: int | None, restored_files: int) -> str | None:
    """An attempt after the first that restored checkpoints but began at step 0: the script ignored them."""
    if attempt > 1 and restored_files > 0 and first_step == 0:
        return (f"attempt {attempt} began at step 0 although {restored_files} checkpoint file(s) were restored into "
                "/opt/ml/checkpoints: the script does not resume from them (load the latest checkpoint at start)")
    return None
