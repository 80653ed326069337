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
