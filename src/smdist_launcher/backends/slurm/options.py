"""What a user may tell Slurm about a job: the one schema for `smdist run --backend slurm` flags,
`fit(backend="slurm", slurm={...})` and `smdist plan --slurm`."""
from __future__ import annotations

import re
from typing import cast

from pydantic import Field, field_validator

from ..toolkit.fault_options import FaultOptions

# sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (man sbatch).
_TIME = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2})$")
# Partition / account / QOS names go into #SBATCH lines: keep them to what Slurm names use.
_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


class SlurmOptions(FaultOptions):
    """`inject` (FaultOptions): fired by each node on itself (node_faults.py): only a node reaches its processes."""

    partition: str | None = Field(default=None, description="sbatch --partition")
    account: str | None = Field(default=None, description="sbatch --account")
    qos: str | None = Field(default=None, description="sbatch --qos")
    time: str | None = Field(default=None, description="sbatch --time (default: the job's max_run)")
    gpus_per_node: int | None = Field(default=None, ge=0, le=64,
                                      description="GPUs per node (default: the instance type's GPUs)")

    @field_validator("partition", "account", "qos")
    @classmethod
    def _slurm_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError("must be a Slurm name: 1-64 letters, digits, '_', '.', '+' or '-'")
        return value

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not _TIME.fullmatch(value):
            raise ValueError("must be a Slurm time: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
                             "(e.g. 2:00:00 for two hours)")
        return value


def slurm_options(values: dict | None = None) -> SlurmOptions:
    """Validated options; bad values raise smdist_launcher.ValidationError with the key path (slurm.<key>)."""
    from ..api import validated_options

    return cast(SlurmOptions, validated_options(SlurmOptions, values, "slurm"))
