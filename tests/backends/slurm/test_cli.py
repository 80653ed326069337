"""The Slurm lifecycle from the command line, on the real test cluster: run --no-wait, status, logs --follow, stop."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 2 cores shared: torch imports and slurmd dominate

JOB = """framework: pytorch
entry_point: train.py
source_dir: .
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
distribution:
  torch_distributed:
    enabled: true
  mpi:
    processes_per_host: 1
"""
SCRIPT = """import os, time
print("started on", os.environ["SM_CURRENT_HOST"], flush=True)
time.sleep(300)
"""


def smdist(*args: str, jobs: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "smdist_launcher.cli.main", *args, "--jobs-dir", str(jobs)],
                          capture_output=True, text=True, timeout=timeout)


def _status(name: str, jobs: Path) -> dict:
    done = smdist("status", name, "--json", jobs=jobs)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_no_wait_status_logs_and_stop(slurm_cluster, tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "job.yaml").write_text(JOB)
    jobs = tmp_path / "jobs"
    submitted = smdist("run", str(tmp_path / "job.yaml"), "--backend", "slurm", "--time", "5:00", "--no-wait",
                       "--job-name", "cli-slurm", jobs=jobs)
    assert submitted.returncode == 0, submitted.stderr
    assert "cli-slurm submitted" in submitted.stdout
    fields = _status("cli-slurm", jobs)
    assert fields["backend"] == "slurm" and fields["status"] == "InProgress"
    deadline = time.monotonic() + 300  # 2 torchruns start on a busy 2-core machine
    while "started on algo-2" not in smdist("logs", "cli-slurm", jobs=jobs).stdout:
        assert time.monotonic() < deadline, smdist("logs", "cli-slurm", jobs=jobs).stdout
        time.sleep(1)
    follower = subprocess.Popen([sys.executable, "-m", "smdist_launcher.cli.main", "logs", "cli-slurm", "--follow",
                                 "--jobs-dir", str(jobs)], stdout=subprocess.PIPE, text=True)
    stopped = smdist("stop", "cli-slurm", jobs=jobs)
    assert stopped.returncode == 0, stopped.stderr
    out, _ = follower.communicate(timeout=300)  # --follow returns once the job has ended
    assert "[algo-1 r0] started on algo-1" in out and "[algo-2 r1] started on algo-2" in out
    assert _status("cli-slurm", jobs)["status"] == "Stopped"
    listing = smdist("jobs", jobs=jobs).stdout
    assert "cli-slurm" in listing and "Stopped" in listing
