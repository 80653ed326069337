"""DDP step rate over smddp against NCCL, in the same run, on a small latency-bound model.

    torchrun --nproc_per_node=2 benchmarks/smddp_ddp_step.py --out ddp.json

The model is an MLP of ``--layers`` Linear(hidden, hidden) + ReLU (default 20 x 1024: 21M
parameters), fp32, a small batch, DDP with 25 MB buckets (``bucket_cap_mb``), SGD. Each variant
gets its own DDP wrapper of identical weights:

* ``nccl``: DDP over a NCCL group; ``smddp``: over the smddp group as routed;
* ``smddp_lamport``: over a second smddp group whose AllReduce is forced onto the Lamport kernel
  at every bucket size (its region sized for the largest bucket): what routing DDP's asynchronous
  buckets to it would give;
* ``floor``: NCCL DDP with a comm hook that does what the reducer does without one, except communicate
  (it divides every gradient by the world size, one kernel each): the floor for any backend under DDP's
  default path (``best_possible_ratio``);
* ``noop_hook``: a comm hook that returns each bucket untouched (no division either);
* ``no_comm``: ``no_sync()`` (no reducer work at all).

Variants are timed in ``--rounds`` rounds of ``--steps`` steps (CUDA events), in an order rotated
every round, so drift hits all alike. Reported: per variant the median and quartiles of the
rounds, and per smddp variant the ratio of medians and the median (and range) of the per-round
ratios NCCL / variant. Stdlib + torch only (runs on the GPU image).
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


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


def noop_hook(_state, bucket):  # type: ignore[no-untyped-def]  # DDP compares annotations with real types
    """A comm hook that returns the bucket as it is: the reducer's work without any communication."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def profile(folder: str, rank: int, labels: list[str], step, sync) -> None:  # type: ignore[no-untyped-def]
    """Where each variant's step spends its host time: a profiler table (and a trace) of a few steps per variant."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    os.makedirs(folder, exist_ok=True)
    for label in labels:
        dist.barrier(group=sync)
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                step(label)
            torch.cuda.synchronize()
        if rank == 0:
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
            with open(os.path.join(folder, f"profile_{label}.txt"), "w") as f:
                f.write(table)
            if label in ("nccl", "smddp_lamport", "noop_hook"):
                prof.export_chrome_trace(os.path.join(folder, f"trace_{label}.json"))


def floor_hook(state, bucket):  # type: ignore[no-untyped-def]
    """No communication, but the reducer's own per-gradient work kept: without a comm hook DDP divides every
    gradient by the world size (one kernel each) before the bucket's AllReduce. The floor for any backend
    under DDP's default path (noop_hook skips those divisions too)."""
    for grad in bucket.gradients():
        grad.div_(state)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--profile", default="", help="folder: a torch.profiler table and trace per variant (rank 0)")
    args = parser.parse_args()

    from torch.nn.parallel import DistributedDataParallel as DDP

    import smdist_launcher.smddp  # noqa: F401  registers "smddp"
    from smdist_launcher.smddp import force_path, native_backend

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("smddp")
    rank, ws = dist.get_rank(), dist.get_world_size()
    nccl_pg = dist.new_group(backend="nccl")
    # A second smddp group with every AllReduce on the Lamport kernel, its region fitting any bucket.
    region = int((args.bucket_mb + 8) * 2**20)
    saved = os.environ.get("SMDDP_LAMPORT_BYTES")
    os.environ["SMDDP_LAMPORT_BYTES"] = str(region)
    lamport_pg = dist.new_group(backend="smddp")
    if saved is None:
        os.environ.pop("SMDDP_LAMPORT_BYTES")
    else:
        os.environ["SMDDP_LAMPORT_BYTES"] = saved
    lamport_native = native_backend.native_backend_of(lamport_pg) is not None
    if lamport_native:
        force_path(lamport_pg, "all_reduce", "lamport")
    groups = {"nccl": nccl_pg, "smddp": dist.group.WORLD, "smddp_lamport": lamport_pg, "floor": nccl_pg,
              "noop_hook": nccl_pg}
    sync = dist.new_group(backend="gloo")

    runs = {}
    for label, group in groups.items():
        model = make_model(args.hidden, args.layers)
        ddp = DDP(model, device_ids=[local_rank], process_group=group, bucket_cap_mb=args.bucket_mb,
                  gradient_as_bucket_view=True)
        if label == "noop_hook":
            ddp.register_comm_hook(None, noop_hook)
        elif label == "floor":
            ddp.register_comm_hook(ws, floor_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        # per-rank data (the same for every variant): the AllReduce really sums different gradients
        gen = torch.Generator(device="cuda").manual_seed(1 + rank)
        x = torch.randn(args.batch, args.hidden, device="cuda", generator=gen)
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

    labels = list(runs)
    for label in labels:
        for _ in range(5):
            step(label)
    torch.cuda.synchronize()

    def fast_calls() -> dict[str, list[int]]:
        out = {}
        for label in ("smddp", "smddp_lamport"):
            native = native_backend.native_backend_of(groups[label])
            out[label] = list(native.fast_calls()) if native is not None else []
        return out

    calls_before = fast_calls()
    samples: dict[str, list[float]] = {label: [] for label in labels}
    host: dict[str, list[float]] = {label: [] for label in labels}  # the issuing thread's time per step
    for r in range(args.rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]  # rotated: no fixed neighbour
        for label in order:
            dist.barrier(group=sync)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(label)
            host[label].append((time.perf_counter() - t0) * 1e3 / args.steps)
            end.record()
            end.synchronize()
            samples[label].append(start.elapsed_time(end) / args.steps)
    calls_after = fast_calls()
    # smddp and smddp_lamport took the same steps on the same data: their weights must agree (a
    # 2-rank sum is exact in any order; more ranks may differ by rounding)
    weight_diff = max((a - b).abs().max().item() for a, b in zip(
        runs["smddp"][0].parameters(), runs["smddp_lamport"][0].parameters(), strict=True))
    # the slowest rank's time per round (a step is as slow as its slowest rank)
    table = torch.tensor([samples[label] for label in labels], device="cuda")
    dist.all_reduce(table, op=dist.ReduceOp.MAX, group=nccl_pg)
    per_round = {label: table[i].tolist() for i, label in enumerate(labels)}
    stats = {label: quartiles(values) for label, values in per_round.items()}
    logging_data = runs["smddp"][0]._get_ddp_logging_data()
    report = {
        "device": torch.cuda.get_device_name(), "world_size": ws, "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "params": n_params, "hidden": args.hidden, "layers": args.layers, "batch": args.batch,
        "bucket_mb": args.bucket_mb, "rounds": args.rounds, "steps_per_round": args.steps,
        # DDP's logging keeps the construction-time assignment (one bucket for the first iteration when
        # find_unused_parameters is off); the rebuilt 25 MB buckets show in fast_calls_per_path and NCCL's count
        "first_iteration_bucket_sizes": logging_data.get("bucket_sizes"),
        "smddp_backend": "native" if native_backend.native_backend_of(dist.group.WORLD) is not None else "python",
        "lamport_kernel": bool(getattr(native_backend._module, "LAMPORT", False)),
        "max_weight_diff_smddp_vs_lamport": weight_diff,
        "fast_calls_per_path": {k: [a - b for a, b in zip(calls_after[k], calls_before[k], strict=False)]
                                for k in calls_after},
    }
    for label, (q1, med, q3) in stats.items():
        report[f"step_ms_{label}"] = med
        report[f"step_ms_{label}_q1_q3"] = [q1, q3]
    for label in labels:
        report[f"host_ms_{label}"] = statistics.median(host[label])  # below step_ms: the GPU sets the pace
    for label in ("smddp", "smddp_lamport", "floor", "noop_hook", "no_comm"):
        paired = [n / v for n, v in zip(per_round["nccl"], per_round[label], strict=True)]
        report[f"ratio_{label}"] = stats["nccl"][1] / stats[label][1]  # NCCL / variant: above 1 = faster
        report[f"paired_ratio_{label}"] = [min(paired), statistics.median(paired), max(paired)]
    report["step_rate_ratio"] = report["ratio_smddp"]
    report["best_possible_ratio"] = report["ratio_floor"]  # DDP's default path with a collective that costs nothing
    report["per_round_ms"] = per_round
    if args.profile:
        profile(args.profile, rank, labels, step, sync)
    if rank == 0:
        print(json.dumps({k: v for k, v in report.items() if k != "per_round_ms"}), flush=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    dist.barrier(group=sync)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
