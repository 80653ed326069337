"""FSDP2 step over smddp against NCCL in ONE process per GPU: the same model twice, rounds alternated.

    torchrun --nproc_per_node=2 benchmarks/smddp_fsdp2_step.py --out fsdp2.json
    torchrun --nproc_per_node=2 benchmarks/smddp_fsdp2_step.py --tiny --out /tmp/f.json   # CPU (gloo) check

Separate processes per backend (benchmarks/smp_throughput.py --backend) differ by more than the effect
(three such runs: 0.85x, 0.96x, and 0.91x with every AllGather on NCCL, i.e. the same paths). Here the
default group is smddp and a second group ``new_group(backend="nccl")``; two FSDP2 models of identical
weights (GPT reference model, default 1.3B: dim 2048, 24 layers, 16 heads, vocab 32000, seq 2048, batch
4 per GPU; MixedPrecisionPolicy(bf16 params, fp32 reduce), fp32 AdamW) are built on meshes
``DeviceMesh.from_group`` of each group. Variants, timed in rounds of ``--steps`` steps in an order
rotated every round (drift hits all alike), each round's time the slowest rank's:

* ``nccl``: the model on the NCCL group;
* ``smddp``: the other model on the smddp group, as routed;
* ``smddp_ag_nccl``: the same smddp model with its AllGather forced to NCCL (every collective then takes
  NCCL's path through the smddp backend): its ratio to ``nccl`` is the noise floor of the comparison;
* ``smddp_c1``, ``smddp_c2``: as ``smddp`` with the copy-engine AllGather in 1 / 2 pipelined parts
  (``--variants`` adds them; default nccl, smddp, smddp_ag_nccl: fewer variants, more rounds);
* ``nccl_late``: a third model of the same weights on a second NCCL group, built after the smddp model: its
  ratio to ``nccl`` is the part of the noise floor that comes from the order the models were built in.

Reported: per variant median and quartiles of the step time, the ratio of medians NCCL / variant (above 1
= faster than NCCL) and the per-round paired ratios, the collectives one step issues (count and sizes, by
wrapping torch.distributed's functions for one counted step) and the native backend's fast-call counters
per step (how many AllGathers took the copy engines). Stdlib + torch only (runs on the GPU image).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss

MODELS = {
    "1.3b": (GPTConfig(dim=2048, n_layers=24, n_heads=16, vocab_size=32000), 2048, 4),  # (config, seq, batch)
    "tiny": (GPTConfig(dim=64, n_layers=4, n_heads=4, vocab_size=256), 32, 2),
}
# smddp_cN: the AllGather in N parts; nccl_late: a third model, on a second NCCL group, built after the smddp one
VARIANTS = ("nccl", "smddp", "smddp_ag_nccl", "smddp_c1", "smddp_c2", "nccl_late")
COUNTED = ("all_gather_into_tensor", "all_gather_single", "reduce_scatter_tensor", "reduce_scatter_single")


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


def build(group: dist.ProcessGroup, cfg: GPTConfig, device: torch.device) -> tuple[torch.nn.Module, Any]:
    """An FSDP2 model on a mesh of ``group``; the same weights every call (same seed, same device)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if device.type == "cuda" \
        else MixedPrecisionPolicy()
    torch.manual_seed(0)
    with device:
        model = GPT(cfg)
    mesh = DeviceMesh.from_group(group, device.type)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    return model, opt


@contextlib.contextmanager
def counting(calls: Counter[str]) -> Iterator[None]:
    """Count the collectives torch.distributed's functions issue (outermost call only), with sizes."""
    saved = {name: getattr(dist, name) for name in COUNTED if hasattr(dist, name)}
    depth = [0]

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                out = args[0] if args else kwargs.get("output_tensor", kwargs.get("output"))
                inp = args[1] if len(args) > 1 else kwargs.get("input_tensor", kwargs.get("input"))
                gather = "gather" in name
                t = out if gather else inp  # routing's sizes: AllGather output, ReduceScatter input
                assert isinstance(t, torch.Tensor)
                calls[f"{'all_gather' if gather else 'reduce_scatter'} {t.numel() * t.element_size()} B"] += 1
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
        return counted

    for name, fn in saved.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)


def mark(cuda: bool) -> Any:
    """A point in the step sequence: a CUDA event on the current stream, or the host clock."""
    if not cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def elapsed_ms(a: Any, b: Any) -> float:
    return (b - a) * 1e3 if isinstance(a, float) else float(a.elapsed_time(b))


def ce_stats(native: Any) -> list[int]:
    """(calls, host ns, parts) of the copy-engine AllGathers the C++ backend issued itself (zeros without)."""
    return list(native.ce_stats()) if native is not None and hasattr(native, "ce_stats") else [0, 0, 0]


@contextlib.contextmanager
def timing_ce_calls(native: Any, host_us: dict[str, float], label: str) -> Iterator[None]:
    """Host time per copy-engine AllGather call: issued by C++ (its own counters), or through the Python
    helper the C++ backend calls per call (GIL held; timed around that call)."""
    if native is None:
        yield
        return
    helper = native.helper()
    plain = helper.allgather_ce
    spent = [0.0, 0]

    def timed(*args: Any) -> bool:
        t0 = time.perf_counter()
        try:
            return bool(plain(*args))
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1

    helper.allgather_ce = timed  # the backend looks the method up per call
    before = ce_stats(native)
    try:
        yield
    finally:
        del helper.allgather_ce
        after = ce_stats(native)
        if after[0] > before[0]:
            host_us[label] = round((after[1] - before[1]) / (after[0] - before[0]) / 1e3, 1)
        elif spent[1]:
            host_us[label] = round(spent[0] / spent[1] * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU (gloo) check with a tiny model")
    parser.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--variants", default="nccl,smddp,smddp_ag_nccl", help=f"comma-separated, from {VARIANTS}")
    args = parser.parse_args()

    import smdist_launcher.smddp  # noqa: F401  registers "smddp"
    from smdist_launcher.smddp import force_path, native_backend

    cuda = torch.cuda.is_available() and not args.tiny
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dist.init_process_group("smddp", timeout=timedelta(seconds=180))
    rank, ws = dist.get_rank(), dist.get_world_size()
    smddp_pg = dist.group.WORLD
    nccl_pg = dist.new_group(backend="nccl" if cuda else "gloo")
    sync = dist.new_group(backend="gloo")
    assert smddp_pg is not None
    cfg, seq, batch = MODELS["tiny" if args.tiny else "1.3b"]
    models = {"nccl": build(nccl_pg, cfg, device), "smddp": build(smddp_pg, cfg, device)}
    models["smddp_ag_nccl"] = models["smddp"]
    if "nccl_late" in args.variants.split(","):  # is the NCCL model's gap to smddp_ag_nccl the build order's?
        models["nccl_late"] = build(dist.new_group(backend="nccl" if cuda else "gloo"), cfg, device)
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    tokens = torch.randint(0, cfg.vocab_size, (batch, seq + 1), device=device, generator=gen)
    x, y = tokens[:, :-1], tokens[:, 1:]
    native = native_backend.native_backend_of(smddp_pg)
    variants = tuple(v for v in args.variants.split(",") if v)
    if "nccl" not in variants or not set(variants) <= set(VARIANTS):
        raise SystemExit(f"--variants {args.variants!r}: expected 'nccl' and others from {VARIANTS}")
    for label in variants:
        models.setdefault(label, models["smddp"])
    chunks: list[int] = []  # the engine's default parts, read once it exists

    def engine() -> Any:
        """The smddp group's copy-engine AllGather (None before its first call or without one)."""
        if native is not None:
            return native.helper().allgather
        return getattr(getattr(smddp_pg, "_cuda", None), "allgather_ce", None)

    def set_variant(label: str) -> None:
        if not cuda:  # CPU tensors take gloo whatever the route: nothing to force
            return
        force_path(smddp_pg, "all_gather", "nccl" if label == "smddp_ag_nccl" else None)  # nccl*: no smddp call
        ce = engine()
        if ce is not None:
            if not chunks:
                chunks.append(ce.chunks)
            ce.chunks = int(label[len("smddp_c"):]) if label.startswith("smddp_c") else chunks[0]

    def step(label: str) -> float:
        model, opt = models[label]
        loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach()) if label != "smddp_ag_nccl" else 0.0

    def sync_all() -> None:
        if cuda:
            torch.cuda.synchronize()
        dist.barrier(group=sync)

    # Identical weights and data: the first step's loss must agree (a 2-rank gather is exact on any path).
    first_loss = {label: step(label) for label in ("nccl", "smddp")}
    for label in variants:
        set_variant(label)
        for _ in range(args.warmup):
            step(label)
    calls: dict[str, dict[str, int]] = {}
    host_us: dict[str, float] = {}
    for label in variants:  # one counted step per variant (wrapping costs host time: not timed)
        set_variant(label)
        counter: Counter[str] = Counter()
        with counting(counter), timing_ce_calls(native, host_us, label):
            step(label)
        calls[label] = dict(sorted(counter.items()))
    sync_all()

    fast: dict[str, list[int]] = {label: [0] * 5 for label in variants}
    ce_timed: dict[str, list[int]] = {label: [0, 0, 0] for label in variants}  # native CE calls, host ns, parts
    samples: dict[str, list[float]] = {label: [] for label in variants}
    # per variant: the first step of each block (just after another model or route ran) and the others
    first_ms: dict[str, list[float]] = {label: [] for label in variants}
    later_ms: dict[str, list[float]] = {label: [] for label in variants}
    k = len(variants)
    for r in range(args.rounds):
        # rotated, and reversed every other k rounds: each variant follows every other one in turn
        order = variants[r % k:] + variants[:r % k]
        order = order if (r // k) % 2 == 0 else order[::-1]
        for label in order:
            set_variant(label)
            before = list(native.fast_calls()) if native is not None else []
            ce_before = ce_stats(native)
            sync_all()
            stamps: list[Any] = []
            t0 = time.perf_counter()
            for _ in range(args.steps):
                stamps.append(mark(cuda))
                step(label)
            stamps.append(mark(cuda))
            if cuda:
                torch.cuda.synchronize()
            samples[label].append((time.perf_counter() - t0) / args.steps * 1e3)
            times = [elapsed_ms(a, b) for a, b in zip(stamps, stamps[1:], strict=False)]
            first_ms[label].append(times[0])
            later_ms[label].extend(times[1:])
            if native is not None:
                fast[label] = [f + a - b for f, a, b in zip(fast[label], native.fast_calls(), before, strict=False)]
                ce_timed[label] = [t + a - b for t, a, b in zip(ce_timed[label], ce_stats(native), ce_before,
                                                                strict=True)]
    set_variant("smddp")
    # the slowest rank's time per round (a step is as slow as its slowest rank)
    table = torch.tensor([samples[label] for label in variants], dtype=torch.float64)
    dist.all_reduce(table, op=dist.ReduceOp.MAX, group=sync)
    per_round = {label: table[i].tolist() for i, label in enumerate(variants)}
    stats = {label: quartiles(values) for label, values in per_round.items()}
    n_steps = args.rounds * args.steps
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu", "world_size": ws, "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": {"dim": cfg.dim, "layers": cfg.n_layers, "heads": cfg.n_heads, "vocab": cfg.vocab_size,
                  "params": cfg.n_params(), "seq": seq, "batch_per_gpu": batch},
        "rounds": args.rounds, "steps_per_round": args.steps,
        "smddp_backend": "native" if native is not None else "python",
        "env": {k: v for k, v in os.environ.items() if k.startswith(("SMDDP_", "NCCL_", "TORCH_SYMM"))},
        "first_loss": first_loss, "collectives_per_step": calls,
        # routing.NATIVE_PATH_CODES order: nccl, ce, one_shot, two_shot, lamport (nccl is not counted)
        # rank 0's GPU time per step (CUDA events on the default stream): first of a block vs the rest
        "first_step_ms_median": {label: round(statistics.median(v), 2) for label, v in first_ms.items()},
        "later_steps_ms_median": {label: round(statistics.median(v), 2) for label, v in later_ms.items() if v},
        "fast_calls_per_step": {label: [round(v / n_steps, 2) for v in fast[label]] for label in variants},
        "ce_host_us_per_call": host_us, "ce_default_parts": chunks[0] if chunks else None,
        # the timed rounds: host time per copy-engine AllGather the C++ backend issued itself, and its parts
        "ce_native_host_us_timed": {label: round(v[1] / v[0] / 1e3, 1) for label, v in ce_timed.items() if v[0]},
        "ce_native_parts_per_call": {label: round(v[2] / v[0], 2) for label, v in ce_timed.items() if v[0]},
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
    }
    for label, (q1, med, q3) in stats.items():
        report[f"step_ms_{label}"] = round(med, 2)
        report[f"step_ms_{label}_q1_q3"] = [round(q1, 2), round(q3, 2)]
    for label in [v for v in variants if v != "nccl"]:
        paired = sorted(n / v for n, v in zip(per_round["nccl"], per_round[label], strict=True))
        report[f"ratio_{label}"] = round(stats["nccl"][1] / stats[label][1], 4)  # above 1 = faster than NCCL
        report[f"paired_ratio_{label}_min_med_max"] = [round(paired[0], 4), round(statistics.median(paired), 4),
                                                       round(paired[-1], 4)]
    report["per_round_ms"] = {k: [round(v, 2) for v in vs] for k, vs in per_round.items()}
    if rank == 0:
        print(json.dumps({k: v for k, v in report.items() if k != "per_round_ms"}), flush=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    dist.barrier(group=sync)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
