"""The docker backend on a private engine with the image built from docker/Dockerfile: the mnist example on
2 containers x 2 processes, no container or network left; without an engine, a clear refusal."""
from __future__ import annotations

import tarfile

import pytest

from smdist_launcher.backends.docker.image import EngineUnavailable
from smdist_launcher.backends.toolkit import records
from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.estimators.base import estimator_from_job_file

from ..hanging_job import start_hanging_job
from .conftest import EXAMPLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # the first run builds the base image


# Both launchers across containers: pytorchddp is mpirun's too (sshd in each container); its own mpirun options
# run on the process backend (test_runtime_scripts) and are pinned in its plans.
@pytest.mark.parametrize("launcher", ["torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_mnist_in_two_containers(use_engine, tiny_mnist, tmp_path, launcher, capsys):
    from smdist_launcher.backends.docker import run_job

    est = estimator_from_job_file(str(EXAMPLE / f"job_{launcher}.yaml"))
    plan = est.plan({"training": f"file://{tiny_mnist}/train", "test": f"file://{tiny_mnist}/test"},
                    job_name=f"docker-{launcher.replace('_', '-')}")
    job = run_job(est.submission(plan), jobs_root=tmp_path)
    out = capsys.readouterr().out
    assert job.record.status == records.COMPLETED and job.record.backend == "docker"
    assert "[algo-1 r0] training on 256 images, world size 4" in out and "test accuracy" in out
    with tarfile.open(job.job_dir / "output" / "model.tar.gz") as tar:
        assert tar.getnames() == ["model.pth"]
    # each host ran its own part and ended well
    assert (job.job_dir / "hosts" / "algo-2" / "opt" / "ml" / "output" / "success").exists()
    logs = "".join((job.job_dir / "logs" / f"{h}.log").read_text() for h in ("algo-1", "algo-2"))
    assert "hostname of the client socket cannot be retrieved" not in logs  # the hosts resolve both ways
    if launcher != "torch_distributed":  # the image's sshd on the worker container, mpirun over ssh
        assert "MPI worker: sshd listening" in (job.job_dir / "logs" / "algo-2.log").read_text()
    assert use_engine.containers() == []  # no container left
    networks = use_engine.docker("network", "ls", "--format", "{{.Name}}").stdout.decode().split()
    assert job.record.backend_info["network"] not in networks
    assert job_processes(job.record.job_id) == []


def test_no_engine_names_the_process_backend(tmp_path, monkeypatch):
    from smdist_launcher.backends.docker import run_job

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    est = estimator_from_job_file(str(EXAMPLE / "job_torch_distributed.yaml"))
    with pytest.raises(EngineUnavailable, match="--backend process"):
        run_job(est.submission(est.plan(job_name="docker-none")), jobs_root=tmp_path)
    assert not (tmp_path / "docker-none").exists()  # refused before anything was made


@pytest.mark.mpi
def test_worker_container_killed_ends_the_job(use_engine, tmp_path):
    import time

    from smdist_launcher.backends.docker import run_job
    from smdist_launcher.errors import JobFailedError

    job = start_hanging_job(run_job, tmp_path, "docker-kill", setup_timeout_s=600)
    killed_at = time.monotonic()
    use_engine.docker("kill", "--signal", "KILL", job.record.hosts["algo-2"]["container"])
    with pytest.raises(JobFailedError):
        job.wait()
    print(f"job ended {time.monotonic() - killed_at:.1f} s after the worker container's SIGKILL")
    assert job.record.status == records.FAILED  # ended by the kill, not by max_run
    assert job.record.failure_reason.startswith("host algo-2")
    assert use_engine.containers() == [] and job_processes(job.record.job_id) == []


@pytest.mark.mpi
def test_a_killed_mpi_container_is_retried_on_fresh_trees(use_engine, tmp_path):
    """The resilience matrix's docker cell: 2 containers x 2 ranks under mpirun through the image's sshd, algo-2 killed
    in attempt 1. Attempt 2's containers mount fresh trees (no old failure.json or master_done.json) and the job ends
    Completed with attempt 2's files only; no container or network is left."""
    from smdist_launcher.backends.docker import run_job
    from smdist_launcher.backends.toolkit.faults import parse_fault

    from ..resilience_job import assert_retried_cleanly, shapes_estimator

    est = shapes_estimator(tmp_path, fail="wait", distribution={"mpi": {"enabled": True, "processes_per_host": 2}})
    job = run_job(est.submission(est.plan(job_name="docker-mpi-killed")), jobs_root=tmp_path / "jobs", logs=False,
                  faults=[parse_fault("kill-host:algo-2@1")])
    assert_retried_cleanly(job.job_dir, "host_lost", {"algo-1": ["0", "1"], "algo-2": ["2", "3"]})
    assert use_engine.containers() == []
    assert job_processes(job.record.job_id) == []
