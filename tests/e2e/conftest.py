"""End-to-end local jobs: real runtimes, real torchrun / mpirun, gloo across simulated hosts.

Every test runs from an empty working directory (`outside`) and checks afterwards that it is
still empty and that no process carrying the job's SMDIST_JOB_ID is left."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends.moto_s3 import moto_endpoint, s3  # noqa: F401 - fixtures shared with tests/backends
from smdist_launcher.backends.local import run_job
from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.errors import JobFailedError

pytestmark = pytest.mark.slow

# Prepended to every test script: torch's env:// rendezvous under mpirun, like examples/mnist/train.py.
PRELUDE = '''
import json, os, sys, time
import torch
import torch.distributed as dist
if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
    os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
    os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
    os.environ["LOCAL_RANK"] = os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]
torch.set_num_threads(1)
'''

DISTRIBUTIONS = {
    "torch_distributed": lambda pph: {"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": pph}},
    "mpi": lambda pph: {"mpi": {"enabled": True, "processes_per_host": pph}},
    "pytorchddp": lambda pph: {"pytorchddp": {"enabled": True}, "mpi": {"processes_per_host": pph}},
    "single": lambda pph: None,
}


@dataclass
class Workspace:
    root: Path
    outside: Path   # the working directory: must stay empty
    jobs: Path
    src: Path
    counter: int = 0

    def plan(self, script: str, *, strategy: str, hosts: int = 2, pph: int = 2, **kwargs: Any):
        from smdist_launcher import PyTorch

        self.counter += 1
        inputs = kwargs.pop("inputs", None)
        self.src.mkdir(exist_ok=True)
        (self.src / "train.py").write_text(PRELUDE + script)
        est = PyTorch(entry_point="train.py", source_dir=str(self.src), instance_type="local", instance_count=hosts,
                      framework_version="2.3", py_version="py311", distribution=DISTRIBUTIONS[strategy](pph),
                      **kwargs)
        return est.plan(inputs, job_name=f"e2e-{strategy.replace('_', '-')}-{self.counter}")

    def run(self, plan, **kwargs: Any) -> tuple[dict[str, Any], JobFailedError | None]:
        """Run to the end; (job record, the JobFailedError if any)."""
        error = None
        try:
            run_job(plan, jobs_root=self.jobs, **kwargs)
        except JobFailedError as exc:
            error = exc
        record = json.loads((self.jobs / plan.job_name / "job.json").read_text())
        assert job_processes(record["job_id"]) == [], "a process of the job survived"
        return record, error


@pytest.fixture(autouse=True)
def _needs_mpirun(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("mpi") and shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun (apt-get install -y openmpi-bin libopenmpi-dev)")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    space = Workspace(tmp_path, outside, tmp_path / "jobs", tmp_path / "src")
    yield space
    assert list(outside.iterdir()) == [], "the job wrote outside its job folder"
    shutil.rmtree(tmp_path / "jobs", ignore_errors=True)  # model archives: keep /tmp small
