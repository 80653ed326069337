"""SMP activation offloading on one GPU: activation checkpointing (AC) alone vs AC + PyTorch's offload_wrapper
vs AC + offload_wrapper with SMP's offloading (sm_activation_offloading, activation_loading_horizon 1, 2, 4).

Run:        PYTHONPATH=src python benchmarks/smp_offload.py --out DIR
CPU smoke:  PYTHONPATH=src python benchmarks/smp_offload.py --tiny

The script is written like an SMP v2 script: tsm.init(config), reentrant checkpoint_wrapper on every
transformer block (what SMP's scripts apply), then offload_wrapper(model) around the whole model. The same
offload_wrapper is PyTorch's own (save_on_cpu: synchronous copies) when the config says
sm_activation_offloading: false, and SMP's (side streams, pinned memory, prefetch `horizon` layers ahead) when true.

Models (bf16 parameters and gradients, plain SGD, batch 1, random tokens):
  gpt1.3b  d 2048 x 24 layers x 16 heads, vocab 32000 (smp_throughput.py's 1.3B), seq 8192
  deep     d 1024 x 96 layers x 16 heads, vocab 32000, seq 16384
Both end in a loss head that computes the logits and cross-entropy 2048 tokens at a time under checkpointing,
so the vocabulary does not dominate memory; all variants share it.

Per variant and model:
  tokens/s     median over rounds of (steps x seq) / time of `steps` training steps, timed with CUDA events
  boundary     memory allocated right after forward minus the memory allocated before it (the model states:
               parameters; gradients are freed between steps) -- what forward leaves for backward.
               Read after a device synchronize and one tiny allocation, so that device blocks whose
               copy-out finished are counted free (the caching allocator reclaims them at its next call).
  peak         max_memory_allocated over forward+backward (absolute, model states included)
  max_seq      the longest sequence (multiples of --seq-step) whose forward+backward fits when the process may
               use at most --cap-gib of device memory (set_per_process_memory_fraction): a cap keeps each probe
               seconds long; probes stop at --max-ratio x AC's longest.
One JSON line per measurement goes to DIR/smp_offload.jsonl as soon as it exists.
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import weakref
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                         apply_activation_checkpointing,
                                                                         checkpoint_wrapper, offload_wrapper)
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import smdist_launcher.smp as tsm  # noqa: E402
from smdist_launcher.smp.reference_models import Block, GPTConfig  # noqa: E402

GIB = 1 << 30


@dataclass(frozen=True)
class ModelSpec:
    cfg: GPTConfig
    seq: int


MODELS = {
    "gpt1.3b": ModelSpec(GPTConfig(dim=2048, n_layers=24, n_heads=16, vocab_size=32000), 8192),
    "deep": ModelSpec(GPTConfig(dim=1024, n_layers=96, n_heads=16, vocab_size=32000), 16384),
    "tiny": ModelSpec(GPTConfig(dim=64, n_layers=6, n_heads=4, vocab_size=256), 64),
}
# name -> (offload_wrapper?, SMP config)
VARIANTS = {
    "ac": (False, {"sm_activation_offloading": False}),
    "ac+torch_offload": (True, {"sm_activation_offloading": False}),
    "ac+smp_offload_h1": (True, {"sm_activation_offloading": True, "activation_loading_horizon": 1}),
    "ac+smp_offload_h2": (True, {"sm_activation_offloading": True, "activation_loading_horizon": 2}),
    "ac+smp_offload_h4": (True, {"sm_activation_offloading": True, "activation_loading_horizon": 4}),
}


class ChunkedLossHead(nn.Module):
    """Final norm, output projection and cross-entropy, `chunk` tokens at a time, each chunk recomputed in backward."""

    def __init__(self, cfg: GPTConfig, chunk: int = 2048) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.chunk = chunk

    def _chunk_loss(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.output(self.norm(h)).float(), t, reduction="sum")

    def forward(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h, targets = h.flatten(0, 1), targets.flatten()
        total = h.new_zeros((), dtype=torch.float32)
        for i in range(0, h.shape[0], self.chunk):
            total = total + checkpoint(self._chunk_loss, h[i:i + self.chunk], targets[i:i + self.chunk],
                                       use_reentrant=False)
        return total / h.shape[0]


class BenchLM(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.head = ChunkedLossHead(cfg)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h, targets)


def build(spec: ModelSpec, variant: str, device: torch.device) -> nn.Module:
    wrap, config = VARIANTS[variant]
    tsm.init(config)  # the script's config decides which offload_wrapper it gets
    torch.manual_seed(0)
    with device:
        model = BenchLM(spec.cfg).to(torch.bfloat16)
    # What SMP's scripts apply: reentrant checkpointing of every transformer block.
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block),
                                   checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper,
                                                                           checkpoint_impl=CheckpointImpl.REENTRANT))
    return offload_wrapper(model) if wrap else model


def free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def settle(device: torch.device) -> int:
    """Allocated bytes once finished side-stream copies have released their blocks."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize()
    torch.empty(1, device=device)  # the allocator processes finished stream uses at its next call
    return torch.cuda.memory_allocated()


def batch(spec: ModelSpec, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, spec.cfg.vocab_size, (1, seq + 1), generator=g).to(device)
    return tokens[:, :-1], tokens[:, 1:]


def measure(spec: ModelSpec, variant: str, device: torch.device, steps: int, rounds: int) -> dict:
    model = build(spec, variant, device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5, foreach=True)
    x, y = batch(spec, spec.seq, device)

    def train_step() -> torch.Tensor:
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    # Memory: one step with synchronizations around forward.
    base = settle(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    loss = model(x, y)
    after_fwd = settle(device)
    loss.backward()
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else 0
    grad_sq = sum(float(p.grad.float().pow(2).sum()) for p in model.parameters() if p.grad is not None)
    first_loss = float(loss.detach())
    opt.zero_grad(set_to_none=True)
    del loss
    for _ in range(2):  # warm-up: kernels chosen, pinned host blocks cached
        train_step()
    rates = []
    for _ in range(rounds):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                train_step()
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1000
        else:
            import time
            t0 = time.perf_counter()
            for _ in range(steps):
                train_step()
            seconds = time.perf_counter() - t0
        rates.append(steps * spec.seq / seconds)
    off = model.__dict__.get("_smp_offloader")
    alive = weakref.ref(model)
    row = {"variant": variant, "seq": spec.seq, "tokens_per_s": statistics.median(rates), "rates": rates,
           "model_states_gib": base / GIB, "boundary_gib": (after_fwd - base) / GIB, "peak_gib": peak / GIB,
           "loss": first_loss, "grad_norm": grad_sq ** 0.5,
           "offloaded_gib": None if off is None else off.stats["offloaded_bytes"] / GIB}
    del model, opt, off, train_step
    free()
    if alive() is not None and os.environ.get("SMP_BENCH_LEAKS"):
        for ref in gc.get_referrers(alive()):
            print("LEAK referrer", type(ref).__name__, str(ref)[:300], flush=True)
            for ref2 in gc.get_referrers(ref)[:8]:
                print("   <-", type(ref2).__name__, str(ref2)[:200], flush=True)
    row["leaked_model"] = alive() is not None
    return row


def fits(spec: ModelSpec, variant: str, seq: int, device: torch.device) -> bool:
    model = build(spec, variant, device)
    x, y = batch(spec, seq, device)
    try:
        model(x, y).backward()
        torch.cuda.synchronize()
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        del model, x, y
        free()


def longest(spec: ModelSpec, variant: str, device: torch.device, start: int, step: int, stop: int) -> int:
    """Largest multiple of `step` in [start, stop] that fits (0 if start does not): ascending probes."""
    best, seq = 0, start
    while seq <= stop and fits(spec, variant, seq, device):
        best, seq = seq, seq + step
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--models", default="gpt1.3b,deep")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--maxseq-models", default="deep,gpt1.3b")
    ap.add_argument("--maxseq-variants", default="ac,ac+torch_offload,ac+smp_offload_h2")
    ap.add_argument("--cap-gib", type=float, default=12.0)
    ap.add_argument("--seq-step", type=int, default=8192)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args()
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "RANK": "0", "WORLD_SIZE": "1",
                       "LOCAL_RANK": "0"}.items():
        os.environ.setdefault(key, value)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    models = ["tiny"] if args.tiny else args.models.split(",")
    out = None
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        out = open(os.path.join(args.out, "smp_offload.jsonl"), "a", encoding="utf-8")

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()

    if device.type == "cuda":
        emit({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "total_gib": torch.cuda.get_device_properties(0).total_memory / GIB})
    table = []
    for name in models:
        spec = MODELS[name]
        for variant in args.variants.split(","):
            row = {"model": name, **measure(spec, variant, device, args.steps, args.rounds)}
            emit(row)
            table.append(row)
    if device.type == "cuda" and args.maxseq_models and not args.tiny:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_gib * GIB / total))
        for name in args.maxseq_models.split(","):
            spec = MODELS[name]
            ac_best = 0
            for variant in args.maxseq_variants.split(","):
                start = args.seq_step if variant == "ac" else max(args.seq_step, ac_best)
                stop = int(args.max_ratio * ac_best) if ac_best else 64 * args.seq_step
                best = longest(spec, variant, device, start, args.seq_step, stop)
                if variant == "ac":
                    ac_best = best
                emit({"model": name, "variant": variant, "cap_gib": args.cap_gib, "max_seq": best,
                      "probe_limit": stop})
        torch.cuda.set_per_process_memory_fraction(1.0)
    print(f"{'model':8} {'variant':20} {'tok/s':>10} {'xAC':>6} {'boundary GiB':>13} {'xAC':>6} {'peak GiB':>9} {'loss':>9}")
    ac = {r["model"]: r for r in table if r["variant"] == "ac"}
    for r in table:
        a = ac.get(r["model"], r)
        print(f"{r['model']:8} {r['variant']:20} {r['tokens_per_s']:10.0f} {r['tokens_per_s'] / a['tokens_per_s']:6.3f} "
              f"{r['boundary_gib']:13.3f} {r['boundary_gib'] / a['boundary_gib'] if a['boundary_gib'] else 0:6.3f} "
              f"{r['peak_gib']:9.2f} {r['loss']:9.5f}")


if __name__ == "__main__":
    main()
