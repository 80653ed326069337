"""status / stop / logs of a job by name, answered by the backend that runs it.

A job record (jobs folder, job.json) names its backend; each backend that needs more than the record plugs in here
with a module providing `refresh(job_dir) -> JobRecord` (up to date, saved) and `stop_job(job_dir)`, and optionally
`follow_logs(job_dir, follow, emit)` when its logs are not the <job>/logs/<host>.log files local mode writes.
A name without a record is looked up on SageMaker (jobs submitted elsewhere, or with another jobs folder)."""
from __future__ import annotations

import importlib
import os
import signal
from pathlib import Path
from typing import Any

# backend (JobRecord.backend) → module with refresh / stop_job [/ follow_logs]
CONTROLS: dict[str, str] = {
    "sagemaker": "smdist_launcher.backends.sagemaker.control",
    "slurm": "smdist_launcher.backends.slurm",
}


def control_of(record: Any) -> Any | None:
    """The backend's control module, or None for backends whose record and log files say everything (local)."""
    module = CONTROLS.get(getattr(record, "backend", "local"))
    return importlib.import_module(module) if module else None


def refresh(record: Any) -> Any:
    control = control_of(record)
    return control.refresh(Path(record.job_dir)) if control else record


def stop(record: Any) -> str:
    """Ask the job to stop; what was done, for the user."""
    control = control_of(record)
    if control is not None:
        control.stop_job(Path(record.job_dir))
        return f"asked {record.backend} to stop {record.job_name}"
    if record.launcher_gone() or record.status != "InProgress":
        return f"{record.job_name} is not running ({record.status})"
    os.kill(record.launcher_pid, signal.SIGTERM)  # the launcher stops every host, packs outputs, records Stopped
    return f"sent SIGTERM to {record.job_name}'s launcher (pid {record.launcher_pid})"


def has_own_logs(record: Any) -> bool:
    control = control_of(record)
    return control is not None and hasattr(control, "follow_logs")
