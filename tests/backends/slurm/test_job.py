"""The Slurm backend on a real Slurm cluster (tests/backends/slurm/cluster.py): the mnist example on 2 nodes x 2
processes under torch_distributed and mpi, a failing rank named, a running job stopped, refusals explained."""
from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from smdist_launcher.backends.slurm import SlurmOptions, run_slurm_job, submit_slurm_job
from smdist_launcher.backends.slurm.scheduler import SlurmError
from smdist_launcher.backends.toolkit import records
from smdist_launcher.errors import JobFailedError
from smdist_launcher.estimators.base import estimator_from_job_file
from smdist_launcher.metrics.store import read_points

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 2 cores shared: torch imports and slurmd dominate
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mnist"




def _mnist_plan(launcher: str, data: Path, name: str):
    est = estimator_from_job_file(str(EXAMPLE / f"job_{launcher}.yaml"))
    return est, est.plan({"training": f"file://{data}/train", "test": f"file://{data}/test"}, job_name=name)


def _squeue(cluster, settle_s: float = 120) -> str:
    """What the queue still holds once Slurm had settle_s to clear finished jobs (CG, completing, included)."""
    deadline = time.monotonic() + settle_s
    while True:
        out = subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=60).stdout.strip()
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def _job_processes(job_id: str) -> list[int]:
    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    return list(job_processes(job_id))


@pytest.mark.parametrize("launcher", ["torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_mnist_runs_on_two_slurm_nodes(slurm_cluster, tiny_mnist, tmp_path, launcher, capsys, monkeypatch):
    name = f"slurm-{launcher.replace('_', '-')}"
    est, plan = _mnist_plan(launcher, tiny_mnist, name)
    if launcher == "torch_distributed":  # the Python API: fit(backend="slurm", slurm={...})
        monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path))
        job = est.fit({"training": f"file://{tiny_mnist}/train", "test": f"file://{tiny_mnist}/test"}, job_name=name,
                      backend="slurm", slurm={"time": "10:00"})
    else:
        job = run_slurm_job(est.submission(plan), SlurmOptions(time="10:00"), jobs_root=tmp_path, logs=True)
    out = capsys.readouterr().out
    record = job.record
    assert record.status == records.COMPLETED and record.backend == "slurm"
    assert "[algo-1 r0] training on 256 images, world size 4" in out  # followed live, prefixed like local mode
    assert "test accuracy" in out
    with tarfile.open(job.job_dir / "output" / "model.tar.gz") as tar:
        assert tar.getnames() == ["model.pth"]
    # each node ran its own host: every rank registered on its own host (sitecustomize's stack file, first line:
    # pid, rank, host), and algo-2's /opt/ml tree has its success marker
    # (mpirun: this test cluster's nodes share one address, 127.0.0.1, so mpirun starts every rank on the first)
    placed = (("algo-1", {0, 1}), ("algo-2", {2, 3})) if launcher == "torch_distributed" else ()
    for host, ranks in placed:
        stacks = job.job_dir / "hosts" / host / "opt" / "ml" / "run" / "stacks"
        seen = {json.loads(f.read_text().splitlines()[0])["rank"] for f in stacks.glob("*.txt")}
        assert seen == ranks, (host, seen)
    assert (job.job_dir / "hosts" / "algo-2" / "opt" / "ml" / "output" / "success").exists()
    assert "#SBATCH --nodes=2" in (job.job_dir / "slurm" / "job.sbatch").read_text()
    assert _squeue(slurm_cluster) == ""
    assert _job_processes(record.job_id) == []


FAILING = '''
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
print(f"loss: {dist.get_rank()}.5", flush=True)
if dist.get_rank() == 3:
    raise RuntimeError("rank three gives up")
time.sleep(120)
'''


def _script_plan(tmp_path: Path, name: str, script: str, hosts: int = 2, **kwargs):
    from smdist_launcher import PyTorch

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text(script)
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=hosts,
                  framework_version="2.3", py_version="py311",
                  distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}}, **kwargs)
    return est, est.plan(job_name=name)


def test_a_rank_that_raises_ends_the_job_naming_it(slurm_cluster, tmp_path):
    est, plan = _script_plan(tmp_path, "slurm-fails", FAILING,
                             metric_definitions=[{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}])
    with pytest.raises(JobFailedError) as failed:
        run_slurm_job(est.submission(plan), SlurmOptions(time="5:00"), jobs_root=tmp_path / "jobs", logs=False)
    assert failed.value.status == records.FAILED
    assert "host algo-2, rank 3" in failed.value.diagnosis and "rank three gives up" in failed.value.diagnosis
    assert _squeue(slurm_cluster) == ""  # scancel-clean: nothing of the job left in the queue
    record = records.JobRecord.load(tmp_path / "jobs" / "slurm-fails" / "job.json")
    assert _job_processes(record.job_id) == []
    # each node fed the job's metrics store (metric definitions from the job folder, its own system samples)
    job_dir = tmp_path / "jobs" / "slurm-fails"
    points = read_points(job_dir)
    assert {(p.rank, p.value) for p in points if p.name == "train:loss"} == {(r, r + 0.5) for r in range(4)}
    assert {p.host for p in points if p.name == "CPUUtilization"} == {"algo-1", "algo-2"}
    assert (job_dir / "output" / "metrics.jsonl").is_file()


SECRET = "hf-sekret-0123456789"
WAITS = f"""
import hashlib, json, os, time
hps = json.loads(os.environ["SM_HPS"])
ok = hashlib.sha256(hps["hub_token"].encode()).hexdigest() == {hashlib.sha256(SECRET.encode()).hexdigest()!r}
print("up", "token ok" if ok else "token WRONG", flush=True)
time.sleep(300)
"""


def test_stop_cancels_a_running_job(slurm_cluster, tmp_path):
    # a secret hyperparameter reaches the script on every node, and no file of the job folder holds it
    est, plan = _script_plan(tmp_path, "slurm-stop", WAITS, hyperparameters={"hub_token": SECRET})
    job = submit_slurm_job(est.submission(plan), SlurmOptions(time="5:00"), jobs_root=tmp_path / "jobs", logs=False)
    deadline = time.monotonic() + 300  # 2 torchruns and 4 ranks start on a busy 2-core machine
    while "up token" not in (job.job_dir / "logs" / "algo-2.log").read_text(errors="replace") if (
            job.job_dir / "logs" / "algo-2.log").exists() else True:
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.5)
    job.stop()
    with pytest.raises(JobFailedError) as stopped:
        job.wait(timeout=180)
    assert stopped.value.status == records.STOPPED
    assert _squeue(slurm_cluster) == ""
    assert _job_processes(job.record.job_id) == []
    assert "token ok" in (job.job_dir / "logs" / "algo-2.log").read_text()
    leaked = [p for p in job.job_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


def test_refusals_say_what_to_change(slurm_cluster, tmp_path):
    est, plan = _script_plan(tmp_path, "slurm-refused", "print('never')\n")
    with pytest.raises(SlurmError, match=r"(?s)refused the job: .*[Ii]nvalid partition.*fix: pick a partition"):
        submit_slurm_job(est.submission(plan), SlurmOptions(partition="nope"), jobs_root=tmp_path / "a", logs=False)
    # Slurm accepts a job over its partition's MaxTime and leaves it pending for ever: named, cancelled, failed
    with pytest.raises(SlurmError, match=r"(?s)never start the job \(pending: Partition(TimeLimit|Config)\).*fix: "):
        run_slurm_job(est.submission(plan), SlurmOptions(partition="short", time="30:00"),
                      jobs_root=tmp_path / "b", logs=False)
    assert records.JobRecord.load(tmp_path / "b" / "slurm-refused" / "job.json").status == records.FAILED
    assert _squeue(slurm_cluster) == ""
    est, big = _script_plan(tmp_path, "slurm-too-big", "print('never')\n", hosts=3)  # the cluster has 2 nodes
    with pytest.raises(SlurmError, match=r"(?s)(refused the job|never start the job).*(node|instance_count)"):
        run_slurm_job(est.submission(big), SlurmOptions(), jobs_root=tmp_path / "c", logs=False)
    assert _squeue(slurm_cluster) == ""


def test_missing_sbatch_names_the_other_backends(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client on PATH
    est, plan = _script_plan(tmp_path, "slurm-nowhere", "print('never')\n")
    with pytest.raises(SlurmError, match="sbatch` was not found.*--backend local"):
        submit_slurm_job(est.submission(plan), jobs_root=tmp_path / "jobs", logs=False)
    assert records.JobRecord.load(tmp_path / "jobs" / "slurm-nowhere" / "job.json").status == records.FAILED


def test_a_killed_node_is_retried_in_the_allocation_from_the_last_checkpoint(slurm_cluster, tmp_path,
                                                                             acceptance_clean_weights):
    """Issue 20's acceptance on Slurm: a host SIGKILLed mid-run (--inject, fired by its own node) ends Completed after
    a second attempt inside the same allocation, resumed from the synced checkpoint, with the weights of an
    uninterrupted run; the first attempt's reason is kept and nothing of the job is left."""
    from ..conftest import ACCEPTANCE_STEPS
    from ..resilience_job import model_weights, resilience_estimator

    monitor = {"log_monitoring": [{"name": "step", "pattern": r"step (\d+)", "expected_every_s": 120}]}
    est = resilience_estimator(tmp_path, "slurm-killed", max_retry_attempts=2, resilience=monitor,
                               environment=ACCEPTANCE_STEPS)
    plan = est.plan(job_name="slurm-killed")
    job = run_slurm_job(est.submission(plan), SlurmOptions(time="10:00", inject=["kill-host:algo-2@5"]),
                        jobs_root=tmp_path / "jobs", logs=False)
    record = job.record
    assert record.status == records.COMPLETED
    first, second = record.attempts
    assert first["cause"] == "host_lost" and first["decision"] == "retry" and "algo-2" in first["reason"]
    assert second["cause"] == "completed" and second["restored_checkpoints"] > 0
    assert second["first_steps"]["step"] > 0  # resumed, read back from the hosts' logs
    assert model_weights(job.job_dir / "output" / "model.tar.gz") == acceptance_clean_weights
    log = (job.job_dir / "logs" / "algo-2.log").read_text()
    assert "injecting kill-host:algo-2@5" in log and "---- attempt 2 ----" in log
    assert (job.job_dir / "attempts" / "1" / "algo-1" / "opt" / "ml" / "output").is_dir()  # the one kept layout
    assert _squeue(slurm_cluster) == ""
    assert _job_processes(record.job_id) == []


def test_a_retry_stages_every_channel_shape_afresh_in_the_one_kept_layout(slurm_cluster, tmp_path):
    """The resilience matrix's Slurm cell: a single-file, a folder and a sharded channel, algo-2 exits 3 in attempt 1
    (retry_on: any). The attempt loop is the shared one: attempt 2 is staged from scratch in the allocation, the
    archives hold its files only, attempt 1's trees are kept under attempts/1/<host>/ as on the local backends and its
    failure is in the report (before, Slurm kept only output/ and model/ in a layout of its own the report missed)."""
    from smdist_launcher.backends.toolkit.job_report import read_report

    from ..resilience_job import assert_retried_cleanly, channel_shapes, shapes_estimator

    est = shapes_estimator(tmp_path, fail="exit3", resilience={"retry_on": "any"})
    plan = est.plan(channel_shapes(tmp_path), job_name="slurm-shapes")
    job = run_slurm_job(est.submission(plan), SlurmOptions(time="10:00"), jobs_root=tmp_path / "jobs", logs=False)
    assert_retried_cleanly(job.job_dir, "script_error", {"algo-1": ["0"], "algo-2": ["0"]})
    assert list(read_report(job.job_dir).earlier_failures) == [1]
    assert (job.job_dir / "attempts" / "1" / "exits").is_dir()  # the nodes' exit notes of attempt 1
    assert _squeue(slurm_cluster) == ""
