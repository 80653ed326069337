"""DDP step rate over smddp against NCCL, in the same run, on a small latency-bound model.

    torchrun --nproc_per_node=2 benchmarks/smddp_ddp_step.py --out ddp.json

The model is an MLP of ``--layers`` Linear(hidden, hidden) + ReLU (default 20 x 1024: 21M
parameters), fp32, a small batch, DDP with 25 MB buckets (``bucket_cap_mb``), SGD. Each backend
gets its own DDP wrapper of identical weights; the two are timed in alternating rounds (CUDA
events around ``--steps`` steps, median of ``--rounds``), so drift hits both alike. A third
wrapper runs the same steps under ``no_sync()`` (no gradient AllReduce at all): the floor that no
backend can beat, so ``nccl / no_comm`` is the largest step-rate ratio a faster AllReduce could give.
Stdlib + torch only (runs on the GPU image).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))


def make_model(hidden: int, layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    mods: list[torch.nn.Module] = []
    for _ in range(layers):
        mods += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods).cuda()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from torch.nn.parallel import DistributedDataParallel as DDP

    import smdist_launcher.smddp  # noqa: F401  registers "smddp"
    from smdist_launcher.smddp import native_backend

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("smddp")
    rank, ws = dist.get_rank(), dist.get_world_size()
    groups = {"smddp": dist.group.WORLD, "nccl": dist.new_group(backend="nccl")}
    sync = dist.new_group(backend="gloo")

    runs = {}
    for label, group in groups.items():
        model = make_model(args.hidden, args.layers)
        ddp = DDP(model, device_ids=[local_rank], process_group=group, bucket_cap_mb=args.bucket_mb,
                  gradient_as_bucket_view=True)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        x = torch.randn(args.batch, args.hidden, device="cuda")
        runs[label] = (ddp, opt, x)
    n_params = sum(p.numel() for p in runs["smddp"][0].parameters())

    runs["no_comm"] = runs["nccl"]

    def step(label: str) -> None:
        ddp, opt, x = runs[label]
        opt.zero_grad(set_to_none=False)
        if label == "no_comm":
            with ddp.no_sync():
                ddp(x).square().mean().backward()
        else:
            ddp(x).square().mean().backward()
        opt.step()

    for label in runs:
        for _ in range(5):
            step(label)
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(args.rounds):
        for label in runs:
            dist.barrier(group=sync)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                step(label)
            end.record()
            end.synchronize()
            samples[label].append(start.elapsed_time(end) / args.steps)
    result = {}
    for label, values in samples.items():
        t = torch.tensor([statistics.median(values)], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["nccl"])
        result[label] = t.item()
    report = {
        "device": torch.cuda.get_device_name(), "world_size": ws, "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "params": n_params, "hidden": args.hidden, "layers": args.layers, "batch": args.batch,
        "bucket_mb": args.bucket_mb, "step_ms_smddp": result["smddp"], "step_ms_nccl": result["nccl"],
        "step_rate_ratio": result["nccl"] / result["smddp"],
        "step_ms_no_comm": result["no_comm"], "best_possible_ratio": result["nccl"] / result["no_comm"],
        "smddp_backend": "native" if native_backend.native_backend_of(dist.group.WORLD) is not None else "python",
        "lamport_kernel": bool(getattr(native_backend._module, "LAMPORT", False)),
    }
    if rank == 0:
        print(json.dumps(report), flush=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    dist.barrier(group=sync)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
