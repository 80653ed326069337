"""The restart policy is data in, decision out: what is retried by default, with retry_on: any, and when it stops."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.toolkit.restart_policy import Attempt, Cause, decide


@pytest.mark.parametrize("cause", [Cause.KILLED, Cause.HOST_LOST, Cause.HANG, Cause.TIMEOUT])
def test_curable_failures_are_retried_until_the_attempts_run_out(cause: Cause) -> None:
    assert decide(Attempt(1, cause), max_attempts=3).action == "retry"
    assert decide(Attempt(2, cause), max_attempts=3).action == "retry"
    last = decide(Attempt(3, cause), max_attempts=3)
    assert last.action == "finish" and "max_retry_attempts reached" in last.why


def test_a_script_error_is_retried_only_with_retry_on_any() -> None:
    default = decide(Attempt(1, Cause.SCRIPT_ERROR), max_attempts=3)
    assert default.action == "finish" and "retry_on: any" in default.why
    assert decide(Attempt(1, Cause.SCRIPT_ERROR), max_attempts=3, retry_on="any").action == "retry"


def test_stopping_completion_and_max_run_are_never_retried() -> None:
    for cause in (Cause.COMPLETED, Cause.STOPPED, Cause.MAX_RUNTIME):
        assert decide(Attempt(1, cause), max_attempts=5, retry_on="any").action == "finish"


def test_a_spot_interruption_restarts_only_spot_jobs() -> None:
    assert decide(Attempt(1, Cause.PREEMPTED), max_attempts=2).action == "finish"
    assert decide(Attempt(1, Cause.PREEMPTED), max_attempts=2, use_spot_instances=True).action == "retry"


def test_without_max_retry_attempts_there_is_one_attempt() -> None:
    assert decide(Attempt(1, Cause.KILLED), max_attempts=1).action == "finish"
