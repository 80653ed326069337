"""The netns backend: every simulated host in its own network namespace with its own sshd. The mnist example on
2 hosts x 2 processes under mpi (real mpirun over real ssh) and torch_distributed; a worker host
killed with SIGKILL ends the whole job, named, with no process or namespace left."""
from __future__ import annotations

import os
import signal
import tarfile
import time

import pytest

from smdist_launcher.backends.netns.job import run_job
from smdist_launcher.backends.netns.network import NETNS_DIR, processes_in
from smdist_launcher.backends.toolkit import records
from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.errors import JobFailedError
from smdist_launcher.estimators.base import estimator_from_job_file

from ..hanging_job import start_hanging_job
from .conftest import EXAMPLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 2 cores shared: torch imports dominate


def _assert_nothing_left(job) -> None:
    assert job_processes(job.record.job_id) == [], "a process of the job survived"
    for ns in job.record.backend_info["namespaces"].values():
        assert not (NETNS_DIR / ns).exists() and processes_in(ns) == []
    assert not (NETNS_DIR / job.record.backend_info["switch"]).exists()
    assert not (job.job_dir / "ssh").exists()  # the job's private key is gone


# Both launchers across namespaces: pytorchddp is mpirun's too (ssh, the same hosts file); its own mpirun
# options run on the process backend (test_runtime_scripts) and are pinned in its plans.
@pytest.mark.parametrize("launcher", [pytest.param("mpi", marks=pytest.mark.mpi), "torch_distributed"])
def test_mnist_on_two_netns_hosts(netns_ready, tiny_mnist, tmp_path, launcher, capsys):
    est = estimator_from_job_file(str(EXAMPLE / f"job_{launcher}.yaml"))
    plan = est.plan({"training": f"file://{tiny_mnist}/train", "test": f"file://{tiny_mnist}/test"},
                    job_name=f"netns-{launcher.replace('_', '-')}")
    job = run_job(est.submission(plan), jobs_root=tmp_path)
    out = capsys.readouterr().out
    record = job.record
    assert record.status == records.COMPLETED and record.backend == "netns"
    assert "[algo-1 r0] training on 256 images, world size 4" in out and "test accuracy" in out
    with tarfile.open(job.job_dir / "output" / "model.tar.gz") as tar:
        assert tar.getnames() == ["model.pth"]
    # each host had its own address on a private subnet
    addresses = [record.hosts[h]["address"] for h in ("algo-1", "algo-2")]
    assert len(set(addresses)) == 2 and all(a.startswith("10.213.") for a in addresses)
    logs = {h: (job.job_dir / "logs" / f"{h}.log").read_text() for h in ("algo-1", "algo-2")}
    # each host ran its own part and ended well
    assert (job.job_dir / "hosts" / "algo-2" / "opt" / "ml" / "output" / "success").exists()
    if launcher != "torch_distributed":  # the real multi-host path: sshd on the worker, mpirun over ssh
        assert "MPI worker: sshd listening on port" in logs["algo-2"]
        assert "every worker's sshd answers" in logs["algo-1"]
        assert "plm_rsh_agent 'ssh -F /opt/ml/run/ssh/ssh_config'" in logs["algo-1"]  # the line is shell-quoted
    _assert_nothing_left(job)


@pytest.mark.mpi
def test_worker_killed_with_sigkill_ends_the_job(netns_ready, tmp_path):
    job = start_hanging_job(run_job, tmp_path, "netns-kill", setup_timeout_s=300)
    worker = job.record.hosts["algo-2"]["pid"]
    killed_at = time.monotonic()
    os.kill(worker, signal.SIGKILL)
    with pytest.raises(JobFailedError) as failed:
        job.wait()
    print(f"job ended {time.monotonic() - killed_at:.1f} s after the worker's SIGKILL")
    assert job.record.status == records.FAILED  # ended by the kill, not by max_run
    assert failed.value.diagnosis.startswith("host algo-2") or "host algo-2 " in job.record.failure_reason
    assert "SIGKILL" in job.record.failure_reason
    _assert_nothing_left(job)


def test_a_killed_host_is_retried_from_the_last_checkpoint(netns_ready, tmp_path, acceptance_clean_weights):
    """Issue 20's acceptance on netns: a host SIGKILLed mid-run (--inject) ends Completed after a second attempt on
    fresh namespaces, resumed from the synced checkpoint, with the weights of an uninterrupted run; no process,
    namespace or key is left."""
    from smdist_launcher.backends.toolkit.faults import parse_fault

    from ..conftest import ACCEPTANCE_STEPS
    from ..resilience_job import model_weights, resilience_estimator

    est = resilience_estimator(tmp_path, "netns-killed", max_retry_attempts=2, environment=ACCEPTANCE_STEPS)
    job = run_job(est.submission(est.plan(job_name="netns-killed")), jobs_root=tmp_path / "jobs", logs=False,
                  faults=[parse_fault("kill-host:algo-2@5")])
    first, second = job.record.attempts
    assert first["cause"] == "host_lost" and "algo-2" in first["reason"] and first["decision"] == "retry"
    assert second["cause"] == "completed" and second["restored_checkpoints"] > 0
    assert model_weights(job.model_data) == acceptance_clean_weights
    _assert_nothing_left(job)


@pytest.mark.mpi
def test_a_killed_mpi_host_is_retried_on_fresh_trees(netns_ready, tmp_path):
    """The resilience matrix's netns cell: 2 hosts x 2 ranks under real mpirun over ssh, algo-2 killed in attempt 1.
    Attempt 2's worker must not find the master's old failure.json or master_done.json (before the one kept layout it
    did, and exited at once); the job ends Completed with attempt 2's files only."""
    from smdist_launcher.backends.toolkit.faults import parse_fault

    from ..resilience_job import assert_retried_cleanly, shapes_estimator

    est = shapes_estimator(tmp_path, fail="wait", distribution={"mpi": {"enabled": True, "processes_per_host": 2}})
    job = run_job(est.submission(est.plan(job_name="netns-mpi-killed")), jobs_root=tmp_path / "jobs", logs=False,
                  faults=[parse_fault("kill-host:algo-2@1")])
    assert_retried_cleanly(job.job_dir, "host_lost", {"algo-1": ["0", "1"], "algo-2": ["2", "3"]})
    _assert_nothing_left(job)
