"""A 2 hosts × 2 ranks mpi job whose ranks hang once they are all up: the host-kill tests of the netns and docker
backends start it, kill a worker host, and watch the job end."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smdist_launcher.backends.toolkit import records

HANG_AFTER_READY = '''
import os, time
import torch.distributed as dist
if "OMPI_COMM_WORLD_RANK" in os.environ:
    os.environ.update(RANK=os.environ["OMPI_COMM_WORLD_RANK"], WORLD_SIZE=os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("gloo")
dist.barrier()
print(f"ready {dist.get_rank()} on {os.uname().nodename}", flush=True)
time.sleep(3600)
'''


def start_hanging_job(run_job: Callable[..., Any], tmp_path: Path, job_name: str, setup_timeout_s: float) -> Any:
    """The running job, returned once rank 3 on algo-2 said it is ready."""
    from smdist_launcher import PyTorch

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(HANG_AFTER_READY)
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", max_run=900,
                  distribution={"mpi": {"enabled": True, "processes_per_host": 2}})
    job = run_job(est.submission(est.plan(job_name=job_name)), jobs_root=tmp_path / "jobs", wait=False, logs=False)
    log2 = job.job_dir / "logs" / "algo-2.log"
    deadline = time.monotonic() + setup_timeout_s  # a bound on the set-up, not a measurement
    while not (log2.exists() and "ready 3 on algo-2" in log2.read_text()):
        assert job.record.status == records.IN_PROGRESS, job.diagnosis
        assert time.monotonic() < deadline, "the ranks never came up"
        time.sleep(0.2)
    return job
