"""Hang detection from progress lines: silent monitors, stuck ranks, stragglers, and where an attempt resumed."""
from __future__ import annotations

from smdist_launcher.container.hang_detector import HangDetector, Monitor, resume_warning

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
