"""Job folders on disk as the local backend leaves them (job.json + logs), for the CLI's listing and removal tests."""
from __future__ import annotations

import time
from pathlib import Path

from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.records import JobRecord, process_start


def make_job(root: Path, name: str, status: str = "Completed", *, age_s: float = 0.0, pid: int | None = None,
             log: str = "", reason: str | None = None) -> JobDir:
    job = JobDir.create(root, name)
    record = JobRecord(job_name=name, job_id=name, job_dir=str(job.root), created=time.time() - age_s,
                       plan={"hosts": [{"name": "algo-1"}], "strategy": "torch_distributed",
                             "instance_count": 1, "processes_per_host": 1})
    if pid is not None:  # the launcher is that process, as its start time says (a reused pid is not)
        record.launcher_pid, record.launcher_started = pid, process_start(pid)
    if status != "InProgress":
        record.finish(status, reason)
    record.save(job.record_file)
    job.log_file("algo-1").write_text(log)
    return job
