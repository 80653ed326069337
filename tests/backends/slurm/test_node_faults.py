"""A Slurm node's faults fire on its own processes: a rank fault signals only the process that carries this job's
and attempt's marker and that rank."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from smdist_launcher.backends.slurm.node_faults import FAULTS_FILE, NodeFaults
from smdist_launcher.backends.toolkit.jobdir import JobDir

_SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def _rank(job_id: str, attempt: int, rank: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SMDIST_JOB_ID": job_id, "SMDIST_ATTEMPT": str(attempt), "RANK": str(rank)}
    return subprocess.Popen(_SLEEP, env=env)


def test_kill_rank_signals_only_this_jobs_attempts_rank(tmp_path: Path) -> None:
    job = JobDir(tmp_path)
    (tmp_path / FAULTS_FILE).parent.mkdir(parents=True)
    (tmp_path / FAULTS_FILE).write_text(json.dumps(["kill-rank:1@0"]))
    runtime = subprocess.Popen(_SLEEP)  # the node's runtime: alive while the attempt runs
    target = _rank("job-a", 2, 1)
    bystanders = [_rank("job-a", 1, 1), _rank("job-b", 2, 1), _rank("job-a", 2, 0)]
    said: list[str] = []
    try:
        faults = NodeFaults(job, "algo-2", {0: "algo-1", 1: "algo-2"}, "job-a", 2, said.append)
        faults.rank_up(runtime)
        assert target.wait(timeout=60) == -signal.SIGKILL  # a bound, not a measurement
        faults.cancel()
        assert all(p.poll() is None for p in bystanders), said
        assert said == ["injecting kill-rank:1@0"]
    finally:
        for p in [runtime, target, *bystanders]:
            p.kill()
            p.wait()
