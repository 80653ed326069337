"""The attempt loop: run an attempt, ask the restart policy (decisions as data), carry out its decision.

A backend supplies the steps (stage and run one attempt; keep it and clear the hosts away between attempts); the
loop is the same for the local backends and Slurm. Whatever is raised while the next attempt is prepared, the job
still ends through its finish step, with the last attempt that ran and its real cause."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..resilience_plan import ResiliencePlan
from ..restart_policy import Attempt, Decision, decide
from ..supervisor import Interrupted
from .book import AttemptBook, AttemptEnd
from .kept_layout import ATTEMPTS_DIR

__all__ = ["AttemptEnd", "AttemptSteps", "AttemptStopped", "LoopEnd", "run_attempts"]


class AttemptStopped(Exception):
    """Raised by a step when the job was asked to stop (stop(), `smdist stop`) before the next attempt's hosts start:
    the job ends Stopped with the attempt before it, rather than starting hosts only to stop them."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LoopEnd:
    attempt: int                    # the last attempt that ran
    ended: AttemptEnd
    decision: Decision
    restart_error: str | None = None  # why the next attempt could not start (the policy had said retry)
    stopped: str | None = None        # the job was stopped (Ctrl-C, SIGTERM, stop()) before the next attempt started


class AttemptSteps(Protocol):
    def run_attempt(self, number: int) -> AttemptEnd:
        """Stage the hosts from scratch, start them, wait for the end. OSError/ValueError: it could not start."""
        ...

    def between_attempts(self, number: int, decision: Decision) -> None:
        """Attempt `number` is over and another follows: keep its trees, sync its checkpoints, clear the hosts."""
        ...


def run_attempts(steps: AttemptSteps, resilience: ResiliencePlan, book: AttemptBook) -> LoopEnd:
    """Attempts until the restart policy says finish. The first attempt's staging errors are raised (the job could
    not start); a later one's end the loop with the attempt before it, and so does a stop (Ctrl-C, SIGTERM, stop())
    while the next attempt is prepared: the job still ends through its finish step, its outputs packed."""
    last: LoopEnd | None = None
    while True:
        number = book.begin()
        try:
            ended = steps.run_attempt(number)
        except (OSError, ValueError) as exc:
            if last is None:
                raise
            return LoopEnd(last.attempt, last.ended, last.decision,
                           f"attempt {number} could not start: {type(exc).__name__}: {exc}")
        except (KeyboardInterrupt, Interrupted, AttemptStopped) as exc:
            if last is None:
                raise
            return LoopEnd(last.attempt, last.ended, last.decision,
                           stopped=f"{_stop_words(exc)} before attempt {number} started")
        decision = decide(Attempt(number, ended.cause, ended.reason), max_attempts=resilience.max_attempts,
                          retry_on=resilience.retry_on, use_spot_instances=resilience.use_spot)
        book.end(ended, decision)
        last = LoopEnd(number, ended, decision)
        if decision.action == "finish":
            return last
        try:
            steps.between_attempts(number, decision)
        except (OSError, ValueError) as exc:
            return LoopEnd(number, ended, decision,
                           f"attempt {number + 1} could not start: {type(exc).__name__}: {exc}")
        except (KeyboardInterrupt, Interrupted, AttemptStopped) as exc:
            return LoopEnd(number, ended, decision, stopped=f"{_stop_words(exc)} before attempt {number + 1} started")
        book.annotate(number, kept=f"{ATTEMPTS_DIR}/{number}")  # its trees: outputs, failure records, stacks


def _stop_words(exc: BaseException) -> str:
    if isinstance(exc, AttemptStopped):
        return exc.reason
    return f"stopped by {exc.signal_name if isinstance(exc, Interrupted) else 'Ctrl-C'}"
