"""The final words of a local job from how its last attempt ended."""
from __future__ import annotations

from pathlib import Path

from smdist_launcher.backends.local.final_diagnosis import final_words
from smdist_launcher.backends.toolkit import records
from smdist_launcher.backends.toolkit.attempt.loop import AttemptEnd, LoopEnd
from smdist_launcher.backends.toolkit.restart_policy import Cause, Decision
from smdist_launcher.backends.toolkit.supervisor import HostExit, Outcome
from smdist_launcher.contract import MLPaths


def test_a_restart_that_could_not_start_fails_the_job_with_the_last_real_cause(tmp_path: Path) -> None:
    exit3 = "host algo-1, rank 0 failed first with exit code 3"
    outcome = Outcome(records.FAILED, first_failure=HostExit("algo-1", 3, 0.0), reason="host algo-1 exited 3")
    end = LoopEnd(1, AttemptEnd(Cause.SCRIPT_ERROR, exit3), Decision("retry", "any"),
                  "attempt 2 could not start: FileNotFoundError: inputs.train: gone")
    words = final_words(outcome, end, {"algo-1": MLPaths(tmp_path / "algo-1")}, {"algo-1": tmp_path / "algo-1.log"},
                        status=outcome.status, reason=outcome.reason, failure=(exit3, "the traceback"),
                        rank_hosts={0: "algo-1"}, stopping_ns=None)
    assert words.status == records.FAILED
    assert words.reason == f"{exit3}; attempt 2 could not start: FileNotFoundError: inputs.train: gone"
    assert words.diagnosis == "the traceback\nattempt 2 could not start: FileNotFoundError: inputs.train: gone"


def test_a_completed_job_says_so(tmp_path: Path) -> None:
    end = LoopEnd(2, AttemptEnd(Cause.COMPLETED), Decision("finish", "completed"))
    words = final_words(Outcome(records.COMPLETED), end, {}, {}, status=records.COMPLETED, reason="", failure=None,
                        rank_hosts={}, stopping_ns=None)
    assert (words.status, words.reason) == (records.COMPLETED, None)
