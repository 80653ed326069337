"""The deterministic training job of the resilience tests (tests/e2e/test_resilience.py and the netns and Slurm
acceptance runs): its weights after N steps are the same however often it was killed and resumed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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



def resilience_estimator(tmp_path: Path, name: str, **extra: Any) -> Any:
    """2 hosts x 2 processes of TRAIN (16 steps, a checkpoint every 4) with checkpoints synced to a local folder."""
    from smdist_launcher import PyTorch

    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text(TRAIN)
    env = {"STEPS": "16", **extra.pop("environment", {})}
    return PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local",
                   instance_count=extra.pop("instance_count", 2),
                   framework_version="2.3", py_version="py311", environment=env,
                   distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
                   checkpoint_s3_uri=(tmp_path / f"ckpt-{name}").as_uri(), base_job_name=name, **extra)


def model_weights(model_tar: str | Path) -> list[float]:
    """The weights rank 0 wrote into model.tar.gz."""
    import tarfile

    with tarfile.open(str(model_tar).removeprefix("file://")) as tar:
        member = tar.extractfile("weights.json")
        assert member is not None
        return json.load(member)["weights"]


# The light job of the resilience matrix (no torch in the script: it starts in a blink under any launcher). Every
# rank records what its channels held and which checkpoints it found, writes one model and one output file named by
# its attempt, host and rank; on attempt 1 it then fails as FAIL says: "exit3" (algo-2's ranks exit 3) or "wait"
# (every rank sleeps until an injected kill-host ends the attempt).
SHAPES = r'''
import json, os, sys, time
attempt, host = os.environ["SMDIST_ATTEMPT"], os.environ["SM_CURRENT_HOST"]
rank = next((os.environ[k] for k in ("RANK", "OMPI_COMM_WORLD_RANK") if k in os.environ), "0")
seen = {ch: sorted(os.listdir(os.environ["SM_CHANNEL_" + ch.upper()]))
        for ch in json.loads(os.environ.get("SM_CHANNELS", "[]"))}
ckpt = os.environ.get("SMDIST_CHECKPOINT_DIR", "/opt/ml/checkpoints")
resumed = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []
os.makedirs(ckpt, exist_ok=True)
open(os.path.join(ckpt, f"state-{host}-{rank}"), "w").write(attempt)
name = f"attempt{attempt}-{host}-{rank}"
open(os.path.join(os.environ["SM_MODEL_DIR"], f"weights-{name}.txt"), "w").write(attempt)
os.makedirs(os.environ["SM_OUTPUT_DATA_DIR"], exist_ok=True)
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"data-{name}.json"), "w").write(
    json.dumps({"seen": seen, "resumed": resumed}))
print(f"step 0 rank {rank} attempt {attempt}", flush=True)
if attempt == "1" and os.environ.get("FAIL") == "exit3" and host == "algo-2":
    sys.exit(3)
if attempt == "1" and os.environ.get("FAIL") == "wait":
    time.sleep(300)
'''


def shapes_estimator(tmp_path: Path, *, fail: str, **extra: Any) -> Any:
    """SHAPES on 2 hosts (1 process each unless `distribution` says otherwise), checkpoints synced to a folder, two
    attempts."""
    from smdist_launcher import PyTorch

    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text(SHAPES)
    return PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local",
                   instance_count=extra.pop("instance_count", 2), framework_version="2.3", py_version="py311",
                   max_retry_attempts=2, environment={"FAIL": fail, **extra.pop("environment", {})},
                   checkpoint_s3_uri=(tmp_path / "ckpt").as_uri(), **extra)


def channel_shapes(tmp_path: Path) -> dict[str, Any]:
    """A single-file, a folder and a sharded (ShardedByS3Key) local channel."""
    data = tmp_path / "data"
    (data / "folder").mkdir(parents=True)
    (data / "folder" / "a.csv").write_text("1\n")
    (data / "sharded").mkdir()
    for i in range(4):
        (data / "sharded" / f"part-{i}.csv").write_text(f"{i}\n")
    (data / "train.csv").write_text("x\n")
    return {"single": str(data / "train.csv"), "folder": str(data / "folder"),
            "sharded": {"uri": str(data / "sharded"), "distribution": "ShardedByS3Key"}}


def archive_members(uri: str | Path) -> list[str]:
    import tarfile

    with tarfile.open(str(uri).removeprefix("file://")) as tar:
        return sorted(tar.getnames())


def assert_retried_cleanly(job_dir: Path, first_cause: str, ranks: dict[str, list[str]]) -> dict[str, Any]:
    """The acceptance of a retried job on any backend: Completed at attempt 2 after `first_cause`, checkpoints
    restored, the archives holding attempt 2's files only (`ranks`: each host's ranks), attempt 1's trees kept under
    attempts/1/ and its failure in the report. Returns the record."""
    from smdist_launcher.backends.toolkit.job_report import read_report

    record = json.loads((job_dir / "job.json").read_text())
    assert record["status"] == "Completed", record["failure_reason"]
    assert [a["cause"] for a in record["attempts"]] == [first_cause, "completed"]
    assert record["attempts"][1]["restored_checkpoints"] > 0
    names = [f"attempt2-{h}-{r}" for h, rs in ranks.items() for r in rs]
    assert archive_members(record["model_data"]) == sorted(f"weights-{n}.txt" for n in names)
    assert archive_members(record["output_data"]) == sorted(f"data-{n}.json" for n in names)
    for host, rs in ranks.items():
        data = job_dir / "hosts" / host / "opt" / "ml" / "output" / "data"
        out = json.loads((data / f"data-attempt2-{host}-{rs[0]}.json").read_text())
        assert any(name.startswith("state-") for name in out["resumed"])  # attempt 1's checkpoints, restored
        assert not (data.parent / "failure").exists()
        assert (job_dir / "attempts" / "1" / host / "opt" / "ml" / "model").is_dir()  # attempt 1's tree, kept
    report = read_report(job_dir)
    assert all(h.failure is None for h in report.hosts)  # the final attempt's hosts did not fail
    assert [a["attempt"] for a in report.record.attempts] == [1, 2]
    return record
