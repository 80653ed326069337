"""The progress watch, on explicit clock values: a hang is found once per attempt, stragglers are reported when they
change, and a new attempt starts with a fresh detector."""
from __future__ import annotations

from smdist_launcher.backends.local.progress_watch import ProgressWatch
from smdist_launcher.container.hang_detector import Hang, Monitor


def _watch() -> tuple[ProgressWatch, list[Hang], list[dict[str, list[int]]]]:
    hangs: list[Hang] = []
    stragglers: list[dict[str, list[int]]] = []
    watch = ProgressWatch([Monitor("step", r"step (\d+)", 10.0, 0.0)], [0, 1], on_stragglers=stragglers.append,
                          on_hang=hangs.append)
    return watch, hangs, stragglers


def test_a_hang_is_reported_once_and_a_new_attempt_forgets_it() -> None:
    watch, hangs, _ = _watch()
    watch.attempt_staged()
    watch.hosts_started(100.0)
    watch.first_rank_up(100.0)
    watch.line(0, "step 1", 101.0)
    watch.line(1, "step 1", 101.0)
    assert watch.check(105.0) is None
    assert watch.check(112.0) is not None and watch.check(113.0) is None  # reported once
    assert len(hangs) == 1 and watch.hang is hangs[0]
    watch.attempt_ended()
    watch.attempt_staged()
    assert watch.hang is None and watch.first_steps() == {}


def test_no_check_while_no_attempt_runs() -> None:
    watch, hangs, _ = _watch()
    watch.attempt_staged()
    watch.first_rank_up(0.0)
    assert watch.check(1000.0) is None and hangs == []  # staged, not started yet


def test_a_silent_start_is_a_hang_from_the_hosts_start() -> None:
    """No rank prints within start_after_s (a rendezvous that never ends): the silence counts from the hosts' start."""
    watch, hangs, _ = _watch()
    watch.attempt_staged()
    watch.hosts_started(0.0)
    assert watch.check(5.0) is None and watch.check(11.0) is not None
