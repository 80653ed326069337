"""Exceptions every layer shares. Kept dependency-free: the runtime imports this too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_MISSING = object()


@dataclass(frozen=True)
class ErrorItem:
    """One problem in the user's input.

    path: dotted key path from the estimator's arguments, e.g.
      ``distribution.smdistributed.modelparallel.parameters.tensor_parallel_degree``
    message: what is allowed and how to fix it (no path prefix).
    value: the offending value (``MISSING`` when the key is absent).
    """

    path: str
    message: str
    value: Any = field(default=_MISSING)

    @property
    def has_value(self) -> bool:
        return self.value is not _MISSING

    def __str__(self) -> str:
        where = self.path or "<root>"
        return f"{where}: {self.message}"


class ValidationError(ValueError):
    """All problems of one input, raised together before anything is uploaded or started."""

    def __init__(self, errors: list[ErrorItem], source: str | None = None) -> None:
        self.errors: list[ErrorItem] = list(errors)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        lines = [f"{prefix}{e}" for e in self.errors]
        head = f"{len(self.errors)} problem{'s' if len(self.errors) != 1 else ''} in the job specification:"
        return "\n".join([head, *("  " + line for line in lines)])


class AwsSetupError(ValidationError):
    """This machine is not set up to call AWS (no credentials, no region): one line saying what to set.

    A ValidationError, so that the CLI reports it as one line with exit code 2, like every other bad input."""

    def render(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class ValidationWarning(UserWarning):
    """A legal but suspicious setting (e.g. more processes per host than GPUs)."""


class JobFailedError(RuntimeError):
    """A job ended without success. ``diagnosis`` names the first failing host/rank."""

    def __init__(self, job_name: str, status: str, diagnosis: str, job_dir: str | None = None) -> None:
        self.job_name = job_name
        self.status = status
        self.diagnosis = diagnosis
        self.job_dir = job_dir
        where = f" (logs and partial outputs in {job_dir})" if job_dir else ""
        super().__init__(f"Job {job_name} {status}{where}:\n{diagnosis}")
