"""Job file → resolved job + channels → plan, with problems reported as compiler-style lines. Shared by the
subcommands."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ValidationError, ValidationWarning
from .console import problem

if TYPE_CHECKING:  # pragma: no cover
    from ..jobspec.estimator_args import EstimatorArgs
    from ..jobspec.resolved import ResolvedJob
    from ..plan.model import Channel, LaunchPlan

EXIT_OK = 0
EXIT_DIFFERS = 1
EXIT_INVALID = 2


@dataclass(frozen=True)
class LoadedJob:
    job: ResolvedJob
    channels: dict[str, Channel]
    warnings: list[str] = field(default_factory=list)
    args: EstimatorArgs | None = None   # the validated arguments (what the SageMaker request is built from)

    def plan(self) -> LaunchPlan:
        from ..plan.planner import build_plan

        return build_plan(self.job, self.channels)


def load_job(path: str, *, check_inputs: bool = False) -> LoadedJob:
    """Validate and resolve the job file (ValidationError with every problem); ValidationWarnings are collected, not
    printed. check_inputs: local input folders must exist."""
    from .. import jobspec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ValidationWarning)
        job_file = jobspec.load_job_file(path, check_inputs=check_inputs)
        job = jobspec.resolve(job_file)
    notes = [str(w.message) for w in caught if issubclass(w.category, ValidationWarning)]
    for w in caught:
        if not issubclass(w.category, ValidationWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return LoadedJob(job=job, channels=dict(job_file.inputs), warnings=notes, args=job_file.args)


def report_invalid(source: str, error: ValidationError) -> int:
    """One line per problem on stderr: ``job.yaml: distribution.mpi.processes_per_host: must be ≥ 1, got 0``."""
    for item in error.errors:
        problem(f"{source}: {item}")
    return EXIT_INVALID


def report_warnings(source: str, notes: list[str]) -> None:
    for note in notes:
        problem(f"{source}: warning: {note}", warning=True)


def load_or_report(path: str, *, check_inputs: bool = False) -> LoadedJob | int:
    """The loaded job, or the exit code after reporting why it cannot be loaded (unreadable or invalid YAML
    included)."""
    try:
        loaded = load_job(path, check_inputs=check_inputs)
    except ValidationError as exc:
        return report_invalid(path, exc)
    report_warnings(path, loaded.warnings)
    return loaded
