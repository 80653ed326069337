"""What serve was started with: where jobs go, who runs them, which backend (its own module: jobs.py and
container_jobs.py both read it, and neither imports the other's back)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Settings:
    jobs_dir: Path
    region: str = "us-east-1"
    account: str = "123456789012"
    processes_per_host: int | None = None   # None: the job's own (1 per simulated host on CPU)
    backend: str = "process"                # a backends.registry name, already checked (registry.choose)
    run_as: str | None = None               # the user every job's processes run as (process backend); None: ours
