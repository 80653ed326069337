"""The attempt loop carries out the restart policy's decisions; whatever is raised while the next attempt is prepared,
it ends with the last attempt that ran and its real cause (before, a retry whose staging failed recorded only "could
not start" and lost the script's exit 3)."""
from __future__ import annotations

import signal
from typing import Any

import pytest

from smdist_launcher.backends.toolkit.attempt.book import AttemptBook
from smdist_launcher.backends.toolkit.attempt.loop import AttemptEnd, AttemptStopped, run_attempts
from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
from smdist_launcher.backends.toolkit.restart_policy import Cause, Decision
from smdist_launcher.backends.toolkit.supervisor import Interrupted


class Steps:
    """Attempts that end as scripted; `broken` names a step that raises (staging of attempt 2, or between)."""

    def __init__(self, ends: list[AttemptEnd], broken: str = "") -> None:
        self.ends = list(ends)
        self.broken = broken
        self.ran: list[int] = []
        self.kept: list[int] = []

    def run_attempt(self, number: int) -> AttemptEnd:
        if self.broken == f"stage-{number}":
            raise FileExistsError("[Errno 17] File exists: train.csv")
        self.ran.append(number)
        return self.ends.pop(0)

    def between_attempts(self, number: int, decision: Decision) -> None:
        if self.broken == "between":
            raise OSError("no space left on device")
        self.kept.append(number)


def _book() -> tuple[AttemptBook, list[list[dict[str, Any]]]]:
    saved: list[list[dict[str, Any]]] = []
    return AttemptBook(saved.append), saved


ANY = ResiliencePlan(max_attempts=3, retry_on="any")
EXIT_3 = AttemptEnd(Cause.SCRIPT_ERROR, "host algo-1, rank 0 failed first with exit code 3")


def test_a_retry_then_completion() -> None:
    steps, (book, saved) = Steps([EXIT_3, AttemptEnd(Cause.COMPLETED)]), _book()
    end = run_attempts(steps, ANY, book)
    assert end.attempt == 2 and end.ended.cause is Cause.COMPLETED and end.restart_error is None
    assert steps.ran == [1, 2] and steps.kept == [1]
    assert [(e["attempt"], e["cause"], e["decision"]) for e in saved[-1]] == [
        (1, "script_error", "retry"), (2, "completed", "finish")]
    assert saved[-1][0]["kept"] == "attempts/1" and "kept" not in saved[-1][1]  # where attempt 1's files are
    assert all(e["started"] <= e["ended"] for e in saved[-1])


@pytest.mark.parametrize("broken", ["stage-2", "between"])
def test_a_next_attempt_that_cannot_start_ends_with_the_last_real_cause(broken: str) -> None:
    steps, (book, saved) = Steps([EXIT_3], broken), _book()
    end = run_attempts(steps, ANY, book)
    assert end.attempt == 1 and end.ended is EXIT_3
    assert end.restart_error is not None and end.restart_error.startswith("attempt 2 could not start: ")
    assert [e["cause"] for e in saved[-1]] == ["script_error"]


def test_a_first_attempt_that_cannot_start_is_raised() -> None:
    with pytest.raises(FileExistsError):
        run_attempts(Steps([], "stage-1"), ANY, _book()[0])


def test_the_policy_decides_finish_for_a_script_error_by_default() -> None:
    steps, (book, saved) = Steps([EXIT_3]), _book()
    end = run_attempts(steps, ResiliencePlan(max_attempts=3), book)
    assert end.decision.action == "finish" and steps.kept == [] and len(saved[-1]) == 1


def test_the_book_numbers_attempts_itself() -> None:
    """The attempt number is the book's, not read back from a record another writer may have saved meanwhile."""
    book, saved = _book()
    assert book.begin() == 1
    book.end(EXIT_3, Decision("retry", "again"))
    saved[-1].clear()  # whatever happens to what was saved, the count stays
    assert book.begin() == 2


class Interrupting(Steps):
    """Ctrl-C (KeyboardInterrupt) or SIGTERM (Interrupted) while attempt 2 is prepared."""

    def __init__(self, ends: list[AttemptEnd], where: str, exc: BaseException) -> None:
        super().__init__(ends)
        self.where, self.exc = where, exc

    def run_attempt(self, number: int) -> AttemptEnd:
        if self.where == f"stage-{number}":
            raise self.exc
        return super().run_attempt(number)

    def between_attempts(self, number: int, decision: Decision) -> None:
        if self.where == "between":
            raise self.exc
        super().between_attempts(number, decision)


@pytest.mark.parametrize("where", ["stage-2", "between"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt(), Interrupted(signal.SIGTERM), AttemptStopped("stopped by stop()")])
def test_a_stop_while_the_next_attempt_is_prepared_ends_with_the_last_attempt(where: str, exc: BaseException) -> None:
    """Before: the interrupt escaped the loop and the job ended without its finish step (nothing packed)."""
    steps, (book, saved) = Interrupting([EXIT_3], where, exc), _book()
    end = run_attempts(steps, ANY, book)
    assert end.attempt == 1 and end.ended is EXIT_3 and end.restart_error is None
    assert end.stopped is not None and end.stopped.endswith("before attempt 2 started")
    assert end.stopped.startswith(("stopped by Ctrl-C", "stopped by SIGTERM", "stopped by stop()"))
    assert [e["cause"] for e in saved[-1]] == ["script_error"]


def test_a_stop_during_the_first_attempts_staging_is_raised() -> None:
    with pytest.raises(KeyboardInterrupt):
        run_attempts(Interrupting([], "stage-1", KeyboardInterrupt()), ANY, _book()[0])
