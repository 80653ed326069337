"""Hang detection from progress lines: silent monitors, stuck ranks, stragglers, and where an attempt resumed."""
from __future__ import annotations

from smdist_launcher.container.hang_detector import HangDetector, Monitor, process_restart_notice, resume_warning

STEP = Monitor("step", r"step (\d+)", expected_every_s=10, start_after_s=30)


def test_no_hang_before_start_after_nor_while_lines_come() -> None:
    d = HangDetector([STEP], ranks=[0, 1])
    assert d.check(100.0) is None  # no rank started yet
    d.started(0.0)
    assert d.check(35.0) is None  # within start_after_s + expected_every_s
    for t in range(30, 100, 5):
        d.line(0, f"step {t}", float(t))
        d.line(1, f"step {t}", float(t))
        assert d.check(float(t) + 1) is None


def test_silence_names_the_rank_that_stopped_first() -> None:
    d = HangDetector([STEP], ranks=[0, 1, 2])
    d.started(0.0)
    for step, t in enumerate(range(30, 60, 5)):
        for rank in (0, 2):
            d.line(rank, f"loss 1.0 step {step}", float(t))
    d.line(1, "step 0", 30.0)  # rank 1 stops after its first step
    hang = d.check(70.0)
    assert hang is not None and hang.monitor == "step" and hang.silent_for_s == 15.0
    assert hang.stuck_ranks == [1] and hang.last_steps == {0: 5, 1: 0, 2: 5}
    assert d.stragglers("step", behind=3) == [1]


def test_a_monitor_that_never_matched_hangs_after_start_after_plus_expected() -> None:
    d = HangDetector([STEP], ranks=[0])
    d.started(0.0)
    assert d.check(39.0) is None
    hang = d.check(41.0)
    assert hang is not None and hang.stuck_ranks == [0] and hang.last_steps == {}


def test_resume_from_step_zero_after_a_restore_is_flagged() -> None:
    d = HangDetector([STEP], ranks=[0])
    d.started(0.0)
    d.line(0, "step 0", 1.0)
    assert d.first_step("step") == 0
    assert "does not resume" in (resume_warning(2, d.first_step("step"), restored_files=4) or "")
    assert resume_warning(1, 0, restored_files=4) is None  # the first attempt starts at 0 by design
    assert resume_warning(2, 120, restored_files=4) is None


def test_stragglers_by_default_are_far_behind_not_a_step_late() -> None:
    d = HangDetector([STEP], ranks=[0, 1, 2])
    d.started(0.0)
    for rank, step in ((0, 200), (1, 199), (2, 150)):
        d.line(rank, f"step {step}", 1.0)
    assert d.all_stragglers() == {"step": [2]}  # 50 behind: more than a tenth of 200; rank 1 is in lockstep
    d.line(2, "step 195", 2.0)
    assert d.all_stragglers() == {}


def test_an_in_place_restart_gives_the_ranks_their_grace_again() -> None:
    """A restarted rank reloading for longer than expected_every_s is not hung: the runtime's restart notice (a host
    line, as the launcher reads it) or restarted() starts every clock over, start_after_s included."""
    for restart in ("notice", "call"):
        d = HangDetector([STEP], ranks=[0, 1])
        d.started(0.0)
        for t in range(30, 55, 5):
            d.line(0, f"step {t}", float(t))
            d.line(1, f"step {t}", float(t))
        if restart == "notice":
            d.line(None, process_restart_notice(1, 1, 2), 56.0)
        else:
            d.restarted(56.0)
        assert d.check(56.0 + 30 + 9) is None, restart  # reloading: within its grace and one interval
        assert d.stragglers("step") == []  # the steps of before the crash are gone
        hang = d.check(56.0 + 30 + 11)
        assert hang is not None and hang.silent_for_s == 11.0, restart
        assert d.first_step("step") == 30  # where the attempt resumed stays


def test_a_rank_line_with_the_notice_words_restarts_nothing() -> None:
    d = HangDetector([STEP], ranks=[0])
    d.started(0.0)
    d.line(0, "step 1", 30.0)
    d.line(0, "restarting them in place", 35.0)  # a rank's own words
    assert d.check(41.0) is not None


def test_ranks_silent_from_the_host_start_hang_after_start_after_plus_expected() -> None:
    """Stuck in rendezvous or NCCL init: no rank line ever comes, yet the monitor's clock runs from the host's start."""
    d = HangDetector([STEP], ranks=[0, 1])
    d.host_started(0.0)
    assert d.check(39.0) is None
    hang = d.check(41.0)
    assert hang is not None and hang.stuck_ranks == [0, 1] and hang.silent_for_s == 11.0


def test_a_rank_started_within_the_grace_starts_the_clock() -> None:
    d = HangDetector([STEP], ranks=[0])
    d.host_started(0.0)
    d.started(20.0)  # its first line, within start_after_s of the host's start
    assert d.check(59.0) is None
    assert d.check(61.0) is not None
    late = HangDetector([STEP], ranks=[0])
    late.host_started(0.0)
    late.started(35.0)  # after the grace: the host's start counts
    assert late.check(41.0) is not None


def test_the_grace_is_for_the_first_match_not_the_gaps_after_it() -> None:
    d = HangDetector([STEP], ranks=[0])
    d.started(0.0)
    d.line(0, "step 0", 2.0)  # early: the grace (30 s) is over for this monitor
    assert d.check(11.0) is None
    hang = d.check(13.0)
    assert hang is not None and hang.silent_for_s == 11.0
