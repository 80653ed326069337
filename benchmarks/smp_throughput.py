"""SMP v2 runtime throughput on one node: plain FSDP2 vs ours (TP x HSDP, AC, activation offloading).

Run (4 GPUs):  python3 -m torch.distributed.run --standalone --nproc-per-node 4 benchmarks/smp_throughput.py --out DIR
CPU smoke:     python -m torch.distributed.run --standalone --nproc-per-node 4 benchmarks/smp_throughput.py --tiny

Every configuration trains the same GPT-style model in bf16 (FSDP2 MixedPrecisionPolicy: bf16 params, fp32
reductions; fp32 AdamW state) on random tokens, with the same global batch: TP configurations give each
data-parallel group tp x the per-GPU batch. The model is called as AWS's scripts call a Hugging Face causal LM,
``model(input_ids=..., labels=...).loss`` (smdist_launcher.smp.reference_causal_lm: HF's ForCausalLMLoss), so
TP configurations compute the loss vocabulary-parallel (TPOptions.vocab_parallel_loss; "-vploss" turns it off:
logits all-gathered, the whole loss on every TP rank).
Reported per configuration: tokens/s/GPU, MFU (989 TFLOP/s; 6N + 12*L*d*seq FLOPs per token), peak
allocated memory (max over ranks). One JSON line per configuration is appended to DIR/results.jsonl as
soon as it is measured, so a later failure loses nothing.

Tensor-parallel ablation (1.3B, local_modules.TPOptions): "smp tp2 base" turns off batch_split_sp and
grouped_partial_grads (sequence parallelism split over the sequence, one all-reduce per partial-gradient parameter),
"+batchsplit" / "+grouped" turn one on. Second round: "smp tp2 prev" is the defaults before it (FSDP2 over the
one-rank data-parallel mesh, DTensor.to_local per parameter, gathered inputs and weight casts kept for backward);
"+fastlocal" adds LocalShard, "+unitdp" also shard_model without FSDP2 (unit_dp), "smp tp2" is the defaults (also
the weight recasts: unit_dp's bf16 casts cast again in backward, not kept); "+regather" (column inputs gathered again
in backward), "+async" (row projections fused with their collectives on symmetric memory, CUDA), "+async+regather"
add what did not pay, "-unitdp" takes unit_dp out.
--profile-only SUBSTR profiles (torch.profiler, one step) only the matching cases: ops, GPU-busy time (union of
kernel intervals on all streams) against the step's wall time.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import smdist_launcher.smp as tsm  # noqa: E402
from smdist_launcher.smp.reference_causal_lm import GPTForCausalLM  # noqa: E402
from smdist_launcher.smp.reference_models import GPTConfig  # noqa: E402
from smdist_launcher.smp.state import reset_state  # noqa: E402
from smdist_launcher.smp.tensor_parallel import local_modules  # noqa: E402

PEAK_FLOPS = 989e12
PROFILE = False  # --profile
PROFILE_ONLY: list[str] = []  # --profile-only: substrings of the cases to profile
PROFILE_DIR = ""  # where rank 0 appends each profiled case's op table (profile.txt)
PROFILE_CASE = ""
MODELS = {
    "1.3b": GPTConfig(dim=2048, n_layers=24, n_heads=16, vocab_size=32000),
    "6.7b": GPTConfig(dim=4096, n_layers=32, n_heads=32, vocab_size=32000),
    "tiny": GPTConfig(dim=64, n_layers=4, n_heads=4, vocab_size=256),
}


@dataclass
class Case:
    name: str
    model: str
    seq: int
    batch_per_gpu: float  # sequences per GPU (global batch / world); < 1 only with TP
    mode: str  # "fsdp2" (upstream only) or "smp"
    smp: dict = field(default_factory=dict)
    ac: bool = False
    offload: float = 0.0  # fraction of offloadable blocks whose activations go to host memory
    horizon: int = 2
    sp: bool = True  # sequence parallelism with TP
    tp_options: dict = field(default_factory=dict)  # local_modules.TPOptions fields (the ablation)


# TPOptions before issue 30's second round (FSDP2 over the one-rank data-parallel mesh, DTensor.to_local per
# parameter, gathered inputs and weight casts kept for backward)
PREV = {"fast_local": False, "unit_dp_without_fsdp": False, "regather_input": False, "recast_weights": False,
        "async_tp": False}


def cases(tiny: bool) -> list[Case]:
    if tiny:
        return [
            Case("fsdp2", "tiny", 32, 2, "fsdp2"),
            Case("fsdp2+ac", "tiny", 32, 2, "fsdp2", ac=True),
            Case("smp tp1", "tiny", 32, 2, "smp"),
            Case("smp tp1+offload", "tiny", 32, 2, "smp", offload=1.0, horizon=1),
            Case("smp tp2", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2}),
            Case("smp tp2 -vploss", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2},
                 tp_options={"vocab_parallel_loss": False}),
            Case("smp tp2 base", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2},
                 tp_options={"batch_split_sp": False, "grouped_partial_grads": False}),
            Case("smp tp2 prev", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2}, tp_options=PREV),
            Case("smp tp2 +async+regather", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2},
                 tp_options={"async_tp": True, "regather_input": True}),
            Case("smp tp2 hsdp(rep2)", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 2, "hybrid_shard_degree": 1}),
            Case("smp tp4+ac", "tiny", 32, 2, "smp", {"tensor_parallel_degree": 4}, ac=True),
            Case("smp tp4 long", "tiny", 128, 0.25, "smp", {"tensor_parallel_degree": 4}),
        ]
    out = []
    for model, seq, b in (("1.3b", 2048, 4), ("6.7b", 4096, 2)):
        offloads = ((0.25, 2), (0.5, 2), (1.0, 2), (0.25, 4)) if model == "1.3b" else ((0.25, 2), (0.25, 4), (0.5, 4))
        out += [
            Case("fsdp2", model, seq, b, "fsdp2"),
            Case("fsdp2+ac", model, seq, b, "fsdp2", ac=True),
            Case("smp tp1", model, seq, b, "smp"),
            Case("smp tp1+ac", model, seq, b, "smp", ac=True),
            *(Case(f"smp tp1+offload({f},h{h})", model, seq, b, "smp", offload=f, horizon=h) for f, h in offloads),
            Case("smp tp2", model, seq, b, "smp", {"tensor_parallel_degree": 2}),
            Case("smp tp4", model, seq, b, "smp", {"tensor_parallel_degree": 4}),
        ]
        if model == "1.3b":
            tp2 = {"tensor_parallel_degree": 2}
            off = {"batch_split_sp": False, "grouped_partial_grads": False}
            out += [
                Case("smp tp2 no-SP", model, seq, b, "smp", tp2, sp=False),
                Case("smp tp2 -vploss", model, seq, b, "smp", tp2, tp_options={"vocab_parallel_loss": False}),
                Case("smp tp2 base", model, seq, b, "smp", tp2, tp_options=off),
                Case("smp tp2 +batchsplit", model, seq, b, "smp", tp2, tp_options={**off, "batch_split_sp": True}),
                Case("smp tp2 +grouped", model, seq, b, "smp", tp2, tp_options={**off, "grouped_partial_grads": True}),
                # issue 30's second round: "prev" is the defaults before it; each change added in turn
                Case("smp tp2 prev", model, seq, b, "smp", tp2, tp_options=PREV),
                Case("smp tp2 +fastlocal", model, seq, b, "smp", tp2, tp_options={**PREV, "fast_local": True}),
                Case("smp tp2 +unitdp", model, seq, b, "smp", tp2,
                     tp_options={**PREV, "fast_local": True, "unit_dp_without_fsdp": True}),
                Case("smp tp2 +regather", model, seq, b, "smp", tp2, tp_options={"regather_input": True}),
                Case("smp tp2 +async", model, seq, b, "smp", tp2, tp_options={"async_tp": True}),
                Case("smp tp2 +async+regather", model, seq, b, "smp", tp2,
                     tp_options={"async_tp": True, "regather_input": True}),
                Case("smp tp2 -unitdp", model, seq, b, "smp", tp2, tp_options={"unit_dp_without_fsdp": False}),
            ]
    # The 6.7B seq-8192 pair (global batch 2): plain FSDP2 + AC against TP 2 (one TP group, 2 sequences).
    s8k = {"tensor_parallel_degree": 2}
    out += [
        Case("fsdp2+ac s8k", "6.7b", 8192, 1, "fsdp2", ac=True),
        Case("smp tp2+ac s8k", "6.7b", 8192, 1, "smp", s8k, ac=True),
        Case("smp tp2+ac -vploss s8k", "6.7b", 8192, 1, "smp", s8k, ac=True,
             tp_options={"vocab_parallel_loss": False}),
        Case("smp tp2+ac prev s8k", "6.7b", 8192, 1, "smp", s8k, ac=True, tp_options=PREV),
        Case("smp tp2+ac+async s8k", "6.7b", 8192, 1, "smp", s8k, ac=True, tp_options={"async_tp": True}),
        Case("smp tp2 s8k", "6.7b", 8192, 1, "smp", s8k),  # may not fit: after the AC run
    ]
    # The same pair at larger global batches (on 2 GPUs: 4 to 16 sequences of 8192): where does each stop fitting?
    # TP's vocabulary-parallel loss keeps a bf16 logits slice where HF's loss holds float32 copies of all the logits.
    # Each TP case runs before the FSDP2 case of its batch, the FSDP2 cases that may not fit last: an OOM may wedge
    # NCCL.
    def s8k_pair(gb: int) -> tuple[Case, Case]:
        return (Case(f"smp tp2+ac s8k gb{gb}", "6.7b", 8192, gb / 2, "smp", s8k, ac=True),
                Case(f"fsdp2+ac s8k gb{gb}", "6.7b", 8192, gb / 2, "fsdp2", ac=True))
    (tp4, fsdp4), (tp6, fsdp6), (tp8, fsdp8), (tp12, fsdp12), (tp16, fsdp16) = (
        s8k_pair(gb) for gb in (4, 6, 8, 12, 16))
    out += [tp4, fsdp4, tp6, tp8, fsdp6, fsdp8, tp12, tp16, fsdp12, fsdp16]
    # Long context: one 32k sequence per TP group; plain FSDP2 needs >= 1 sequence per GPU.
    out += [
        Case("smp tp4 seq32k", "6.7b", 32768, 0.25, "smp", {"tensor_parallel_degree": 4}),
        Case("smp tp2 seq32k", "6.7b", 32768, 0.5, "smp", {"tensor_parallel_degree": 2}),
        Case("fsdp2 seq32k", "6.7b", 32768, 1, "fsdp2"),  # expected not to fit: last, since OOM may wedge NCCL
    ]
    return out


def flops_per_token(cfg: GPTConfig, seq: int) -> float:
    return 6 * cfg.n_params() + 12 * cfg.n_layers * cfg.dim * seq


def build(case: Case, device: torch.device, world: int):
    cfg = MODELS[case.model]
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if device.type == "cuda" \
        else MixedPrecisionPolicy()
    with torch.device("meta"):
        model = GPTForCausalLM(cfg)
    offloader = None
    if case.mode == "fsdp2":
        mesh = init_device_mesh(device.type, (world,))
        for i, layer in enumerate(model.layers):
            if case.ac:
                layer = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
                model.layers[i] = layer
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        dp = world
    else:
        reset_state()
        local_modules.OPTIONS = local_modules.TPOptions(**case.tp_options)
        tsm.init(case.smp)
        model = tsm.transform(model, sequence_parallel=case.sp)
        if case.ac:
            tsm.apply_activation_checkpointing(model)
        if case.offload:
            offloader = tsm.apply_activation_offloading(model, horizon=case.horizon, offload_fraction=case.offload,
                                                        min_bytes=0 if device.type == "cpu" else 1 << 20)
        tsm.shard_model(model, mp_policy=mp)
        dp = tsm.state.dp_size
    tsm.materialize(model, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    return model, opt, dp, offloader


def run_case(case: Case, device: torch.device, warmup: int, steps: int) -> dict:
    world = dist.get_world_size()
    cfg = MODELS[case.model]
    model, opt, dp, offloader = build(case, device, world)
    global_batch = round(case.batch_per_gpu * world)
    local_batch = global_batch // dp
    g = torch.Generator(device=device).manual_seed(1234 + (tsm.state.dp_rank if case.mode == "smp" else dist.get_rank()))
    x = torch.randint(0, cfg.vocab_size, (local_batch, case.seq), device=device, generator=g)
    y = x  # labels: shifted by one inside the loss, as Hugging Face's

    def step() -> torch.Tensor:
        loss = model(input_ids=x, labels=y).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync(device)
    elapsed = time.perf_counter() - t0
    tok_per_gpu = global_batch * case.seq * steps / elapsed / world
    phases = phase_times(model, opt, x, y, device)
    global PROFILE_CASE
    PROFILE_CASE = f"{case.model}:{case.name}"
    if PROFILE or any(s in PROFILE_CASE for s in PROFILE_ONLY):
        phases.update(host_profile(step, device))
    peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0], device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    row = {**asdict(case), "global_batch": global_batch, "step_s": elapsed / steps,
           "tokens_per_s_per_gpu": tok_per_gpu, "mfu": tok_per_gpu * flops_per_token(cfg, case.seq) / PEAK_FLOPS,
           "peak_gib": peak.item(), "loss": loss.item(), "n_params": cfg.n_params(), **phases}
    if offloader is not None:
        row["offloaded_gib_per_step"] = offloader.stats["offloaded_bytes"] / (warmup + steps) / 2**30
        offloader.remove()
    del model, opt, offloader
    return row


def host_profile(step, device: torch.device) -> dict:
    """One step under torch.profiler: how many ops the host launches and the GPU's kernel time (rank 0's view)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        step()
        sync(device)
        wall = time.perf_counter() - t0
    events = prof.events()
    ops = sum(1 for e in events if e.device_type.name == "CPU" and e.name.startswith("aten::"))
    kernels = [e for e in events if e.device_type.name == "CUDA"]
    kernel_us = sum(e.device_time for e in kernels)
    busy, end = 0.0, float("-inf")  # union of kernel intervals over all streams
    for start, stop in sorted((e.time_range.start, e.time_range.end) for e in kernels):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    names = [e.name for e in events if e.device_type.name == "CPU"]
    collectives = sum(1 for n in names if n.startswith("c10d::") or n.startswith("_c10d_functional::"))
    dtensor = sum(e.cpu_time for e in events if "Redistribute" in e.name or "DTensor" in e.name)
    if dist.get_rank() == 0 and PROFILE_DIR:
        table = prof.key_averages().table(sort_by="device_time_total" if device.type == "cuda" else "cpu_time_total",
                                          row_limit=25, max_name_column_width=60)
        with open(os.path.join(PROFILE_DIR, "profile.txt"), "a", encoding="utf-8") as fh:
            fh.write(f"=== {PROFILE_CASE}\n{table}\n")
    return {"aten_ops_per_step": ops, "kernel_s_per_step": kernel_us / 1e6, "dtensor_host_s": dtensor / 1e6,
            "profiled_step_s": wall, "gpu_busy_s": busy / 1e6, "collectives_per_step": collectives,
            "cat_ops_per_step": names.count("aten::cat")}


def phase_times(model, opt, x, y, device: torch.device) -> dict:
    """One extra step with a sync between forward, backward and optimizer (rank 0's view)."""
    marks = [time.perf_counter()]
    loss = model(input_ids=x, labels=y).loss
    sync(device)
    marks.append(time.perf_counter())
    loss.backward()
    sync(device)
    marks.append(time.perf_counter())
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync(device)
    marks.append(time.perf_counter())
    return {"fwd_s": marks[1] - marks[0], "bwd_s": marks[2] - marks[1], "opt_s": marks[3] - marks[2]}


def host_copy_bandwidth(device: torch.device, gib: float = 2.0) -> dict:
    """Device->pinned host and back, all ranks at once (what activation offloading competes for)."""
    if device.type != "cuda":
        return {}
    n = int(gib * 2**30)
    dev = torch.empty(n, dtype=torch.uint8, device=device)
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    out = {}
    for name, dst, src in (("d2h", host, dev), ("h2d", dev, host)):
        dst.copy_(src, non_blocking=True)
        sync(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(3):
            dst.copy_(src, non_blocking=True)
        sync(device)
        out[f"{name}_gbps"] = 3 * n / (time.perf_counter() - t0) / 1e9
    del dev, host
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--tiny", action="store_true", help="CPU smoke run with a tiny model")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names (model:name) to run")
    ap.add_argument("--reverse", action="store_true", help="run the selected cases in reverse order")
    ap.add_argument("--profile", action="store_true", help="one extra step under torch.profiler per case")
    ap.add_argument("--profile-only", default="", help="comma-separated substrings: profile only these cases")
    ap.add_argument("--backend", choices=("nccl", "smddp"), default="nccl",
                    help="process-group backend of the default group (smddp: smdist_launcher.smddp)")
    args = ap.parse_args()
    global PROFILE, PROFILE_DIR, PROFILE_ONLY
    PROFILE = args.profile
    PROFILE_ONLY = [s for s in args.profile_only.split(",") if s]
    PROFILE_DIR = args.out
    from smdist_launcher.smp import process_group
    if args.backend == "smddp":  # the default group (and so FSDP2's collectives) over smddp; nccl: as below
        from datetime import timedelta

        import smdist_launcher.smddp  # noqa: F401  registers the "smddp" backend
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        dist.init_process_group("smddp", timeout=timedelta(seconds=180))
    process_group.ensure_initialized(timeout_s=180)
    device = process_group.current_device()
    rank = dist.get_rank()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.jsonl")
    def wanted(key: str) -> bool:  # "model:name" substrings; a trailing $ asks for that exact case
        return not args.only or any(key == s[:-1] if s.endswith("$") else s in key for s in args.only.split(","))

    selected = [c for c in cases(args.tiny) if wanted(f"{c.model}:{c.name}")]
    if args.reverse:
        selected.reverse()
    rows = []
    bw = host_copy_bandwidth(device)
    if bw:
        t = torch.tensor([bw["d2h_gbps"], bw["h2d_gbps"]], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        if rank == 0:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"probe": "host_copy_4gpu_concurrent_min", "d2h_gbps": t[0].item(),
                                     "h2d_gbps": t[1].item()}) + "\n")
            print(f"pinned host copies, all GPUs at once (min over ranks): D2H {t[0].item():.1f} GB/s, "
                  f"H2D {t[1].item():.1f} GB/s", flush=True)
    for case in selected:
        try:
            row = run_case(case, device, args.warmup, args.steps)
        except torch.OutOfMemoryError as exc:
            row = {**asdict(case), "error": "OOM", "detail": str(exc).splitlines()[0][:200]}
        except Exception as exc:  # a deterministic failure hits every rank alike; keep measuring the rest
            row = {**asdict(case), "error": type(exc).__name__, "detail": str(exc)[:300]}
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
        if rank == 0:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            print(format_row(row), flush=True)
    if rank == 0:
        print("\n".join(format_row(r) for r in rows), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def format_row(r: dict) -> str:
    head = f"{r['model']:>5} seq{r['seq']:<6} {r['name']:<22}"
    if "error" in r:
        return f"{head} {r['error']}"
    return (f"{head} {r['tokens_per_s_per_gpu']:>9.0f} tok/s/GPU  MFU {100 * r['mfu']:5.1f}%  "
            f"peak {r['peak_gib']:6.1f} GiB  step {r['step_s']:.3f}s  "
            f"(fwd {r['fwd_s']:.3f} bwd {r['bwd_s']:.3f} opt {r['opt_s']:.3f})"
            + (f"  aten ops/step {r['aten_ops_per_step']} kernels {r['kernel_s_per_step']:.3f}s"
               f" GPU busy {r['gpu_busy_s']:.3f}s of {r['profiled_step_s']:.3f}s, {r['collectives_per_step']} "
               f"collectives, {r['cat_ops_per_step']} cat" if "aten_ops_per_step" in r else ""))


if __name__ == "__main__":
    main()
