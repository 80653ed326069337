"""Goodput under repeated host failures (docs/resilience.md): the same 2x2 CPU training job twice, once untouched and
once with a host killed every --kill-every seconds (fault rehearsal), each resumed from checkpoints written every
--checkpoint-every seconds of training.

    .venv/bin/python benchmarks/goodput.py --steps 600 --step-s 0.3 --kill-every 60 [--out results.json]

Reports, for the faulted job: goodput (training-step time / wall time, relative to the untouched job: every step run
counts, redone ones included, so it measures what the restarts cost), productive goodput (the untouched job's wall
time / the faulted job's: redone steps count as lost), the attempts it took, and per kill the recovery time (from the
kill to the first step line of the next attempt, split into ending the attempt, restaging, and start-up to the first
step) and the training lost (steps redone)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TRAIN = r'''
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt_dir = os.environ.get("SMDIST_CHECKPOINT_DIR", "/opt/ml/checkpoints")
ckpt = os.path.join(ckpt_dir, "state.pt")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.module.load_state_dict(state["model"])
    start = state["step"]
every = int(os.environ["CKPT_STEPS"])
for step in range(start, int(os.environ["STEPS"])):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 64, generator=g)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} t {time.time():.3f}", flush=True)
    if (step + 1) % every == 0 and int(os.environ.get("LOCAL_RANK", "0")) == 0:
        os.makedirs(ckpt_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "step": step + 1}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
    time.sleep(float(os.environ["STEP_S"]))
dist.destroy_process_group()
'''
STEP_LINE = re.compile(rb"step (\d+) t ([0-9.]+)")
RANK0_STEP = re.compile(rb"\[algo-1 r0\] step (\d+) t ([0-9.]+)")


def run(tmp: Path, name: str, args: argparse.Namespace, faults: list[str]) -> dict:
    from smdist_launcher import PyTorch

    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text(TRAIN)
    ckpt_steps = max(1, round(args.checkpoint_every / args.step_s))
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", base_job_name=name,
                  environment={"STEPS": str(args.steps), "STEP_S": str(args.step_s), "CKPT_STEPS": str(ckpt_steps)},
                  distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
                  checkpoint_s3_uri=(tmp / f"ckpt-{name}").as_uri(), max_retry_attempts=30)
    started = time.time()
    job = est.fit(logs=False, jobs_root=str(tmp / "jobs"), inject=faults)
    wall = time.time() - started
    record = json.loads((job.job_dir / "job.json").read_text())
    log = (job.job_dir / "logs" / "algo-1.log").read_bytes()
    steps = [(int(m[1]), float(m[2])) for m in STEP_LINE.finditer(log)]
    kills = [i["at"] for i in record["backend_info"].get("injected", [])]
    recoveries, lost, parts = [], [], []
    attempts = record["attempts"]
    for n, at in enumerate(kills):
        before = [s for s, t in steps if t <= at]
        after = [(s, t) for s, t in steps if t > at]
        if after:
            recoveries.append(round(after[0][1] - at, 2))
            lost.append((max(before) + 1 - after[0][0]) if before else 0)
        if n + 1 < len(attempts) and after:  # where the recovery went: ending, restaging, starting up
            ended, nxt = attempts[n], attempts[n + 1]
            parts.append({"kill_to_attempt_end_s": round(ended["ended"] - at, 2),
                          "restage_s": round(nxt["running"] - ended["ended"], 2),
                          "start_to_first_step_s": round(after[0][1] - nxt["running"], 2)})
    rank0 = [(int(m[1]), float(m[2])) for m in RANK0_STEP.finditer(log)]
    # a step's duration: between two consecutive step lines of rank 0 within one attempt (the step number goes up
    # by one); the median is robust to the pauses around checkpoints
    gaps = sorted(t2 - t1 for (s1, t1), (s2, t2) in zip(rank0, rank0[1:], strict=False) if s2 == s1 + 1)
    return {"job": job.job_name, "status": record["status"], "wall_s": round(wall, 1),
            "attempts": len(record["attempts"]), "kills": len(kills), "recovery_s": recoveries,
            "recovery_parts": parts, "steps_redone": lost, "steps_run": len(rank0),
            "step_s_median": round(gaps[len(gaps) // 2], 4) if gaps else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--step-s", type=float, default=0.3)
    p.add_argument("--kill-every", type=float, default=60.0)
    p.add_argument("--checkpoint-every", type=float, default=20.0)
    p.add_argument("--out")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="smdist-goodput-") as folder:
        tmp = Path(folder)
        clean = run(tmp, "clean", args, [])
        expected = clean["wall_s"]
        hosts = ["algo-2", "algo-1"]
        faults = [f"kill-host:{hosts[i % 2]}@{args.kill_every * (i + 1):g}"
                  for i in range(int(expected * 2 // args.kill_every))]
        faulted = run(tmp, "faulted", args, faults)
    step_s = clean["step_s_median"]
    # the measure: training-step time (every step run, redone ones included) / wall time, of the faulted
    # job relative to the untouched one: what the restarts cost
    step_goodput = (faulted["steps_run"] * step_s / faulted["wall_s"]) / (clean["steps_run"] * step_s / clean["wall_s"])
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "steps": args.steps, "step_s": args.step_s, "kill_every_s": args.kill_every,
              "checkpoint_every_s": args.checkpoint_every, "clean": clean, "faulted": faulted,
              "goodput": round(step_goodput, 3),
              # stricter: only the steps that count (redone ones are lost work): the untouched wall / the faulted
              "productive_goodput": round(clean["wall_s"] / faulted["wall_s"], 3),
              "recovery_s_max": max(faulted["recovery_s"], default=None)}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
