"""The restart policy: given how an attempt ended, what the job does next. Pure: it returns a decision as data (Ray
Train's shape); the job's loop carries it out (stop everything, sync checkpoints, start the next attempt)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal


class Cause(str, Enum):
    """Why an attempt ended, as far as a retry is concerned."""

    COMPLETED = "completed"
    SCRIPT_ERROR = "script_error"          # the script raised or exited non-zero by itself
    DISK_FULL = "disk_full"                # a host's disk (or quota) was full: a client error, the same next time
    KILLED = "killed"                      # a host or rank ended by a signal it did not send itself
    HOST_LOST = "host_lost"                # a host's runtime vanished (its machine, container or namespace went)
    HANG = "hang"                          # log monitoring saw no progress
    TIMEOUT = "timeout"                    # a rendezvous or collective timed out
    PREEMPTED = "preempted"                # a spot interruption (SIGTERM to every host)
    STOPPED = "stopped"                    # the user stopped the job
    MAX_RUNTIME = "max_runtime"            # max_run reached
    LAUNCHER_ERROR = "launcher_error"      # the launcher's side failed (a log consumer: a full jobs folder)

    @property
    def curable(self) -> bool:
        """A retry can cure it: the failure came from outside the script."""
        return self in _CURABLE


_CURABLE = frozenset({Cause.KILLED, Cause.HOST_LOST, Cause.HANG, Cause.TIMEOUT, Cause.PREEMPTED})


@dataclass(frozen=True)
class Attempt:
    number: int                            # 1-based
    cause: Cause
    reason: str | None = None              # one line, as the status shows it


@dataclass(frozen=True)
class Decision:
    action: Literal["finish", "retry"]
    why: str


def decide(attempt: Attempt, *, max_attempts: int, retry_on: str = "curable",
           use_spot_instances: bool = False) -> Decision:
    """max_attempts: SageMaker's MaximumRetryAttempts (1 when not given: one attempt, no retry)."""
    cause = attempt.cause
    if cause is Cause.COMPLETED:
        return Decision("finish", "completed")
    if cause in (Cause.STOPPED, Cause.MAX_RUNTIME, Cause.LAUNCHER_ERROR):
        return Decision("finish", f"{cause.value}: never retried")
    if cause is Cause.PREEMPTED and not use_spot_instances:
        return Decision("finish", "interrupted like a spot instance, but use_spot_instances is off")
    if not (cause.curable or retry_on == "any"):
        return Decision("finish", f"{cause.value} is not retried (resilience.retry_on: curable; "
                                  "retry_on: any retries it)")
    if attempt.number >= max_attempts:
        return Decision("finish", f"attempt {attempt.number} of {max_attempts}: max_retry_attempts reached")
    return Decision("retry", f"{cause.value}: attempt {attempt.number + 1} of {max_attempts} starts from the last "
                             "checkpoint")
