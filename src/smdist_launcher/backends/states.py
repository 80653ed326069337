"""The states of a job: one enum for every backend, its records, serve, the CLI and the report. Stdlib only (beside
phases.py's Phase), so the CLI and every layer that reads a job record import it cheaply; backends/api.py re-exports
it."""
from __future__ import annotations

from enum import Enum

__all__ = ["TERMINAL_STATES", "JobState"]


class JobState(str, Enum):
    """SageMaker's TrainingJobStatus values, its MaxRuntimeExceeded secondary status, and ours: Interrupted (the
    launcher died before the job ended; the next command that noticed finished it)."""

    IN_PROGRESS = "InProgress"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    INTERRUPTED = "Interrupted"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @classmethod
    def of(cls, value: str | JobState) -> JobState:
        return value if isinstance(value, JobState) else cls(value)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.STOPPED, JobState.MAX_RUNTIME_EXCEEDED,
                             JobState.INTERRUPTED})
