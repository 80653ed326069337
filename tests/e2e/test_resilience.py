"""Jobs that survive failures, on the process backend: a host killed mid-run (fault rehearsal) is retried from the
last checkpoint and ends with the same weights as an uninterrupted run; a hang is detected, named and retried; a
script error is not retried by default; a restart that ignores the checkpoints is flagged."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.errors import JobFailedError

pytestmark = pytest.mark.slow

# Deterministic DDP training: the batch of step k depends on k only, checkpoints every 4 steps hold the exact weights
# (plain SGD: nothing else to save), so a run resumed from a checkpoint ends bit-identical to one that never stopped.
TRAIN = r'''
import json, os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt_dir = os.environ.get("SMDIST_CHECKPOINT_DIR", "/opt/ml/checkpoints")
ckpt = os.path.join(ckpt_dir, "state.pt")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
start = 0
resume = os.environ.get("RESUME", "1") == "1"
if resume and os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.module.load_state_dict(state["model"])
    start = state["step"]
for step in range(start, int(os.environ.get("STEPS", "24"))):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=g)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}", flush=True)
    if os.environ.get("HANG_RANK") == str(rank) and step == 3 and os.environ.get("SMDIST_ATTEMPT") == "1":
        time.sleep(3600)
    if (step + 1) % 4 == 0 and int(os.environ.get("LOCAL_RANK", "0")) == 0:
        os.makedirs(ckpt_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "step": step + 1}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
    time.sleep(float(os.environ.get("STEP_S", "0.3")))
if rank == 0:
    w = [round(v, 12) for v in model.module.weight.detach().flatten().tolist()]
    json.dump({"weights": w}, open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.json"), "w"))
dist.destroy_process_group()
'''


def _estimator(tmp_path: Path, name: str, **extra) -> PyTorch:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text(TRAIN)
    env = {"STEPS": "16", **extra.pop("environment", {})}
    return PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                   framework_version="2.3", py_version="py311", environment=env,
                   distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
                   checkpoint_s3_uri=(tmp_path / f"ckpt-{name}").as_uri(), base_job_name=name, **extra)


def _weights(job) -> list[float]:
    import tarfile

    with tarfile.open(str(job.model_data).removeprefix("file://")) as tar:
        member = tar.extractfile("weights.json")
        assert member is not None
        return json.load(member)["weights"]


def test_a_killed_host_is_retried_from_the_last_checkpoint(tmp_path: Path) -> None:
    jobs = str(tmp_path / "jobs")
    clean = _estimator(tmp_path, "clean", environment={"STEP_S": "0"}).fit(logs=False, jobs_root=jobs)
    est = _estimator(tmp_path, "killed", max_retry_attempts=2)
    job = est.fit(logs=False, jobs_root=jobs, inject=["kill-host:algo-2@4"])
    record = json.loads((job.job_dir / "job.json").read_text())
    assert record["status"] == "Completed"
    first, second = record["attempts"]
    assert first["cause"] == "host_lost" and first["decision"] == "retry" and "algo-2" in first["reason"]
    assert second["cause"] == "completed" and second["restored_checkpoints"] > 0
    assert _weights(job) == _weights(clean)
    log = (job.job_dir / "logs" / "algo-1.log").read_text()
    assert "---- attempt 2 ----" in log and "step 15" in log
    assert (job.job_dir / "attempts" / "1").is_dir()  # the first attempt's outputs and failure records are kept


def test_attempts_run_out_and_every_reason_is_kept(tmp_path: Path) -> None:
    est = _estimator(tmp_path, "exhausted", max_retry_attempts=2)
    with pytest.raises(JobFailedError):  # the second fault falls while the first attempt ends: it hits the second
        est.fit(logs=False, jobs_root=str(tmp_path / "jobs"), inject=["kill-host:algo-2@3", "kill-host:algo-1@3.5"])
    job_dir = next((tmp_path / "jobs").iterdir())
    record = json.loads((job_dir / "job.json").read_text())
    assert record["status"] == "Failed" and len(record["attempts"]) == 2
    assert [a["decision"] for a in record["attempts"]] == ["retry", "finish"]
    assert "max_retry_attempts reached" in record["attempts"][1]["why"]


def test_a_script_error_is_not_retried_unless_retry_on_any(tmp_path: Path) -> None:
    src = tmp_path / "raises"
    src.mkdir()
    (src / "train.py").write_text("raise RuntimeError('a bug in the script')\n")  # no torch needed: start fast
    for policy, attempts in ((None, 1), ({"retry_on": "any"}, 2)):
        est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                      framework_version="2.3", py_version="py311", max_retry_attempts=2, resilience=policy)
        with pytest.raises(JobFailedError):
            est.fit(logs=False, jobs_root=str(tmp_path / f"jobs-{attempts}"))
        record = json.loads(next((tmp_path / f"jobs-{attempts}").glob("*/job.json")).read_text())
        assert [a["cause"] for a in record["attempts"]] == ["script_error"] * attempts
        assert record["failure_reason"] == "host algo-1, rank 0 failed first with exit code 1"


def test_a_hang_is_detected_named_and_retried_and_a_restart_from_zero_is_flagged(tmp_path: Path) -> None:
    monitor = {"log_monitoring": [{"name": "step", "pattern": r"step (\d+)", "expected_every_s": 4}]}
    est = _estimator(tmp_path, "hang", max_retry_attempts=2, resilience=monitor,
                     environment={"HANG_RANK": "1", "RESUME": "0", "STEPS": "8", "STEP_S": "0.1"})
    started = time.monotonic()
    job = est.fit(logs=False, jobs_root=str(tmp_path / "jobs"))
    record = json.loads((job.job_dir / "job.json").read_text())
    first, second = record["attempts"]
    assert first["cause"] == "hang" and "log monitor 'step'" in first["reason"]
    assert "rank 1 " in first["reason"] and "train.py" in first["reason"]  # named with where its stack was
    assert second["cause"] == "completed" and "began at step 0" in second.get("warning", "")
    assert time.monotonic() - started < 120
