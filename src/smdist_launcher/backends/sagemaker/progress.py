"""Status and secondary-status transitions of a training job, as the caller sees them while waiting.

On a terminal one live line is rewritten in place; otherwise (CI logs, pipes, a caller's emit) each transition is
one plain line."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..secondary_status import SecondaryStatus
from ..states import JobState


def transitions(description: dict[str, Any]) -> list[tuple[str, str]]:
    """(secondary status, message) pairs SageMaker reported so far, oldest first."""
    return [(t.get("Status", ""), t.get("StatusMessage", ""))
            for t in description.get("SecondaryStatusTransitions") or []]


# the primary status while a secondary status lasted (SageMaker's pairs); anything else is InProgress
_STATUS_DURING: dict[str, JobState] = {
    SecondaryStatus.STOPPING: JobState.STOPPING, SecondaryStatus.STOPPED: JobState.STOPPED,
    SecondaryStatus.MAX_RUNTIME_EXCEEDED: JobState.STOPPED, SecondaryStatus.COMPLETED: JobState.COMPLETED,
    SecondaryStatus.FAILED: JobState.FAILED}


class Progress:
    """Feed it every DescribeTrainingJob answer; it shows what changed since the last one. Log lines go through
    log_line() so they appear above the live line."""

    def __init__(self, job_name: str, emit: Callable[[str], None], live: bool = False) -> None:
        self._job = job_name
        self._emit = emit
        self._live = live
        self._seen = 0
        self._status: str | None = None
        self._line_open = False

    def _end_live_line(self) -> None:
        if self._line_open:
            sys.stdout.write("\n")
            self._line_open = False

    def _show(self, text: str) -> None:
        if self._live:
            sys.stdout.write("\r\x1b[2K" + text)  # rewrite the one status line
            sys.stdout.flush()
            self._line_open = True
        else:
            self._emit(text)

    def update(self, description: dict[str, Any]) -> None:
        status = description.get("TrainingJobStatus", "")
        steps = transitions(description)
        for i, (secondary, message) in enumerate(steps[self._seen:], start=self._seen):
            # a transition seen late (a short job, a slow poll) shows the status the job had then, not now
            then = status if i == len(steps) - 1 else _STATUS_DURING.get(secondary, JobState.IN_PROGRESS)
            self._show(f"[smdist] {self._job}: {then} / {secondary}" + (f": {message}" if message else ""))
        if status != self._status and len(steps) == self._seen:  # a status change with no new secondary status
            latest = description.get("SecondaryStatus")
            self._show(f"[smdist] {self._job}: {status}" + (f" / {latest}" if latest else ""))
        self._seen, self._status = len(steps), status

    def log_line(self, line: str) -> None:
        self._end_live_line()
        self._emit(line)

    def close(self) -> None:
        self._end_live_line()
        sys.stdout.flush()
