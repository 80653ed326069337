"""Runs under torchrun (2 ranks, gloo): tsm.transform's local tensor parallelism (TP 2) against one process.

Checks (one ``RESULT {json}`` line each on rank 0; tests/smp/test_tp_local_modules.py asserts on them):
- ``layout``: which dimension sequence parallelism splits (batch 2: the batch, no ``aten::cat`` in a step;
  batch 1: the sequence) and how many all-reduces one backward issues (one per block for the partial gradients);
- ``<wrapper>-<split>``: two steps of two accumulated micro-batches (FSDP2 ``set_requires_gradient_sync(False)``
  / FSDP1 ``no_sync`` on the first) give the single-process model's losses and gradient norms;
- ``compile``: the same with each block's forward compiled by the script (Dynamo + Inductor on CPU, functional
  collectives);
- ``fsdp1-orig:frozen``: the same with some norm parameters frozen (FSDP1 puts them in the trained flat parameter);
- ``recompute``: activation checkpointing (reentrant on a middle block, non-reentrant on every block) with three
  forwards of different shapes before one backward (one neither of whose dimensions divides: not split): each
  recompute splits as its own forward did.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel

import smdist_launcher.smp as tsm
from smdist_launcher.smp.grad_norm import clip_grad_norm_
from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state
from smdist_launcher.smp.tensor_parallel import local_modules

CFG = GPTConfig(dim=32, n_layers=2, n_heads=4, vocab_size=64)
SEQ, LR, STEPS = 8, 0.5, 2


def data(batch: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    g = torch.Generator().manual_seed(3)
    steps = []
    for _ in range(STEPS):
        micro = []
        for _ in range(2):
            t = torch.randint(0, CFG.vocab_size, (batch, SEQ + 1), generator=g)
            micro.append((t[:, :-1], t[:, 1:]))
        steps.append(micro)
    return steps


def reference(base: torch.nn.Module, steps) -> tuple[list[float], list[float]]:
    model = copy.deepcopy(base)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, norms = [], []
    for micro in steps:
        for x, y in micro:
            loss = lm_loss(model(x), y)
            loss.backward()
        losses.append(loss.item())
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item())
        opt.step()
        opt.zero_grad()
    return losses, norms


def parallel(base: torch.nn.Module, steps, wrapper: str,
             compile_blocks: bool = False) -> tuple[list[float], list[float]]:
    reset_state()
    tsm.init({"tensor_parallel_degree": 2})
    model = tsm.transform(copy.deepcopy(base))
    if compile_blocks:  # as a script compiling its blocks does (torchtitan): the class and hooks stay eager
        for block in model.layers:
            block.forward = functools.partial(torch.compile(type(block).forward), block)
    if wrapper == "fsdp2":
        tsm.shard_model(model)
    else:
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        model = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({type(model.layers[0])}),
                                         use_orig_params=wrapper == "fsdp1-orig", device_id=torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, norms = [], []
    for micro in steps:
        for i, (x, y) in enumerate(micro):
            last = i == len(micro) - 1
            if wrapper == "fsdp2":
                model.set_requires_gradient_sync(last)
                ctx = contextlib.nullcontext()
            else:
                ctx = contextlib.nullcontext() if last else model.no_sync()
            with ctx:
                loss = lm_loss(model(x), y)
                loss.backward()
        losses.append(loss.item())
        norms.append(float(clip_grad_norm_(model, 1e9)))
        opt.step()
        opt.zero_grad()
    return losses, norms


def freeze(model: torch.nn.Module) -> torch.nn.Module:
    model.layers[0].attention_norm.weight.requires_grad_(False)
    model.layers[1].ffn_norm.bias.requires_grad_(False)
    return model


def recompute() -> dict:
    """Two forwards before one backward, batch 2 seq 8 then batch 1 seq 16: both split into (1, 8) chunks, the
    first over the batch, the second over the sequence; a recompute of the first that took the second's split
    gathered along the wrong dimension (silently wrong gradients with reentrant checkpointing on a middle block)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.utils.checkpoint import checkpoint

    class Reentrant(torch.nn.Module):
        def __init__(self, block: torch.nn.Module) -> None:
            super().__init__()
            self.block = block

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return checkpoint(self.block, x, use_reentrant=True)

    torch.manual_seed(1)
    base = GPT(GPTConfig(dim=32, n_layers=3, n_heads=4, vocab_size=64))
    g = torch.Generator().manual_seed(5)
    # (1, 7): neither divides by 2, that forward is not split
    batches = [torch.randint(0, 64, (b, s + 1), generator=g) for b, s in ((2, 8), (1, 16), (1, 7))]
    row = {}
    for impl in ("reentrant-middle", "nonreentrant-all"):
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.transform(copy.deepcopy(base))
        for i in (1,) if impl == "reentrant-middle" else range(3):
            model.layers[i] = (Reentrant(model.layers[i]) if impl == "reentrant-middle"
                               else checkpoint_wrapper(model.layers[i], checkpoint_impl=CheckpointImpl.NO_REENTRANT))
        ref = copy.deepcopy(base)
        try:
            sum(lm_loss(model(t[:, :-1]), t[:, 1:]) for t in batches).backward()
        except Exception as exc:  # noqa: BLE001 -- reported as the check's result
            row[impl] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        sum(lm_loss(ref(t[:, :-1]), t[:, 1:]) for t in batches).backward()
        grads = {n.replace("block.", "").replace("_checkpoint_wrapped_module.", ""): p.grad
                 for n, p in model.named_parameters()}
        row[impl] = max(float((local_grad(grads[n]) - q.grad).abs().max()) for n, q in ref.named_parameters())
    return row


def local_grad(g: torch.Tensor) -> torch.Tensor:
    return g.full_tensor() if hasattr(g, "full_tensor") else g


def layout(base: torch.nn.Module) -> dict:
    from torch.profiler import profile
    reset_state()
    tsm.init({"tensor_parallel_degree": 2})
    model = tsm.transform(copy.deepcopy(base))
    info = local_modules._info(model.layers[0].attention_norm)
    row: dict = {}
    for batch in (2, 1):
        x, y = data(batch)[0][0]
        with profile() as prof:
            loss = lm_loss(model(x), y)
            dim = info.layout.dim
            loss.backward()
        names = [e.name for e in prof.events()]
        row[f"batch{batch}"] = {"dim": dim, "cat": names.count("aten::cat"),
                                "allreduce": sum("allreduce" in n for n in names)}
    row["blocks"] = CFG.n_layers
    return row


def emit(**row) -> None:
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(row), flush=True)


def main() -> None:
    dist.init_process_group("gloo")
    if os.environ.get("SMP_TP_ABLATE"):  # the earlier behaviour, to see the checks fail without the changes
        local_modules.OPTIONS.batch_split_sp = local_modules.OPTIONS.grouped_partial_grads = False
    torch.manual_seed(0)
    base = GPT(CFG)
    which = sys.argv[1].split(",")
    if "layout" in which:
        emit(check="layout", **layout(base))
    if "recompute" in which:
        emit(check="recompute", **recompute())
    for name in which:
        if name in ("layout", "recompute"):
            continue
        wrapper, _, split = name.partition(":")
        steps = data(2 if split in ("batch", "compile", "frozen") else 1)
        start = freeze(copy.deepcopy(base)) if split == "frozen" else base
        ref = reference(start, steps)
        got = parallel(start, steps, wrapper, compile_blocks=split == "compile")
        row = {"check": name, "losses": got[0], "norms": got[1], "ref_losses": ref[0], "ref_norms": ref[1]}
        if split == "compile":
            from torch._dynamo.utils import counters
            row.update(graphs=counters["stats"]["unique_graphs"], graph_breaks=sum(counters["graph_break"].values()))
        emit(**row)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
