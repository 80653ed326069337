"""The phases of a job, in order: what job.json's `phase` and `phases` hold, what the status line and `smdist jobs`
show, what serve maps to SageMaker's secondary statuses. One definition beside the job states (api.JobState); stdlib
only, so every layer that reads a job record may import it cheaply."""
from __future__ import annotations

from enum import Enum


class Phase(str, Enum):
    """A job's phase. A `str`: job.json keeps the plain value, and a value read back compares equal to its member."""

    CREATED = "created"        # the record exists; nothing started
    QUEUED = "queued"          # waiting for an allocation (Slurm)
    STAGING = "staging"        # host folders, channels, code, restored checkpoints
    STARTING = "starting"      # the hosts' runtimes start
    RUNNING = "running"        # the ranks run
    UPLOADING = "uploading"    # outputs packed, checkpoints synced out
    DONE = "done"              # ended (the job state says how)

    @classmethod
    def of(cls, value: str | Phase) -> Phase:
        return value if isinstance(value, Phase) else cls(value)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
