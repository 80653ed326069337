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
  recompute splits as its own forward did;
- ``vploss``: a Hugging Face-style causal LM called with labels (ignored tokens, ``num_items_in_batch``): the
  vocabulary-parallel loss under unit_dp, FSDP2, FSDP1 (use_orig_params off/on), activation checkpointing, without
  sequence parallelism and with a tied head gives the single-process loss, gradients and next loss, its logits
  left sharded; calls it does not cover (no labels, the option off, ``logits_to_keep``) return what they did;
- ``vpedge``: labels at the edges (all ignored, outside the vocabulary), a vocabulary of 63 over TP 2, the
  forward's signature.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import os
import sys
import weakref

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


def _options(**kw: bool) -> None:
    local_modules.OPTIONS = local_modules.TPOptions(**kw)


def host_work(base: torch.nn.Module) -> dict:
    """One training step of tsm.shard_model's TP-2 model on 2 ranks (a one-rank data-parallel mesh): how many
    FSDP2 hooks and DTensor.from_local calls (one per sharded parameter's gradient with DTensor.to_local) the host
    runs, with the options on (unit_dp: no FSDP2; LocalShard) and off (FSDP2 over the one-rank mesh, to_local)."""
    import cProfile
    import gc
    import pstats

    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor
    row: dict = {}
    for name, kw in (("on", {}), ("off", {"unit_dp_without_fsdp": False, "fast_local": False}),
                     ("fsdp2+fast_local", {"unit_dp_without_fsdp": False})):
        _options(**kw)
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.shard_model(tsm.transform(copy.deepcopy(base)))
        x, y = data(2)[0][0]
        lm_loss(model(x), y).backward()  # warm-up
        model.zero_grad()
        prof = cProfile.Profile()
        prof.enable()
        lm_loss(model(x), y).backward()
        prof.disable()
        calls = {f"{fn[0].rsplit('/', 1)[-1]}:{fn[2]}": st[1] for fn, st in pstats.Stats(prof).stats.items()}
        row[name] = {"fsdp_hooks": sum(n for k, n in calls.items() if k.startswith("_fsdp_state.py:_pre_forward")
                                       or k.startswith("_fsdp_param_group.py:post_backward")),
                     "from_local": sum(n for k, n in calls.items() if k.endswith(":from_local")),
                     "fsdp_module": isinstance(model, FSDPModule),
                     "dtensor_grads": all(isinstance(p.grad, DTensor) for p in model.parameters())}
        ref = weakref.ref(next(model.parameters()))
        del model
        gc.collect()
        row[name]["freed"] = ref() is None  # the model goes with its last reference (no cycle through C++)
    _options()
    return row


def mixed_precision(base: torch.nn.Module) -> dict:
    """bf16 parameters, fp32 gradients (MixedPrecisionPolicy as the benchmark uses it), two steps of two
    accumulated micro-batches (zero_grad to None in between; for unit_dp also zeroed in place): unit_dp (with the
    weight recasts) against FSDP2 over the one-rank mesh; gradients are fp32 DTensors either way."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    row: dict = {}
    for name, kw in (("unit_dp", {}), ("fsdp2", {"unit_dp_without_fsdp": False}), ("unit_dp_zeroed", {})):
        _options(**kw)
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.shard_model(tsm.transform(copy.deepcopy(base)), mp_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses, norms = [], []
        for micro in data(2):
            for x, y in micro:
                loss = lm_loss(model(x), y)
                loss.backward()
            losses.append(loss.item())
            norms.append(float(clip_grad_norm_(model, 1e9)))
            row[f"{name}_grad_dtypes"] = sorted({str(p.grad.dtype) for p in model.parameters()})
            opt.step()
            opt.zero_grad(set_to_none=name != "unit_dp_zeroed")  # zeroed in place: the same storage accumulates
        row[name] = {"losses": losses, "norms": norms}
    # output_dtype: the root's output cast (FSDP2 casts every fully_shard module's output: here the blocks' too,
    # which the final LayerNorm's bf16 parameters refuse on CPU)
    _options()
    reset_state()
    tsm.init({"tensor_parallel_degree": 2})
    out_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, output_dtype=torch.float32)
    model = tsm.shard_model(tsm.transform(copy.deepcopy(base)), mp_policy=out_policy)
    row["unit_dp_output_dtype"] = str(model(data(2)[0][0][0]).dtype)
    return row


def checkpoint(base: torch.nn.Module) -> dict:
    """A DCP checkpoint (tsm's save_model: model and AdamW state) of tsm.shard_model's TP-2 model on 2 ranks
    (unit_dp: TP DTensors, no FSDP2) loads into a fresh one (the next step's loss matches the saved model's)
    and, unsharded, holds the single-process model's values."""
    import shutil
    import tempfile

    from smdist_launcher.smp import checkpoint as smp_ckpt
    steps = data(2)

    def build() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.shard_model(tsm.transform(copy.deepcopy(base)))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    src, src_opt = build()
    step(src, src_opt, *steps[0][0])
    path = [tempfile.mkdtemp(prefix="smp-unitdp-ckpt-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(path)
    smp_ckpt.save_model(path[0], src, src_opt)
    full = {k: v.detach().clone() for k, v in smp_ckpt.full_model_state(src).items()}
    dst, dst_opt = build()
    smp_ckpt.load_model(path[0], dst, dst_opt)
    loaded = smp_ckpt.full_model_state(dst)
    x, y = steps[1][0]
    row = {"max_abs_diff": max(float((full[k] - loaded[k]).abs().max()) for k in full),
           "keys_match": sorted(full) == sorted(base.state_dict()),
           "next_loss": step(src, src_opt, x, y), "loaded_next_loss": step(dst, dst_opt, x, y)}
    dist.barrier()
    if dist.get_rank() == 0:
        shutil.rmtree(path[0])
    return row


def _count_nodes(root, prefix: str) -> int:
    """Autograd nodes whose name starts with ``prefix`` in the graph behind ``root``."""
    seen, stack, count = set(), [root], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        count += node.name().startswith(prefix)
        stack.extend(n for n, _ in node.next_functions)
    return count


def lean_saves(base: torch.nn.Module) -> dict:
    """After a forward (bf16 policy, before backward): how many of the SP norms' gathered outputs and of the
    projections' bf16 weight casts are still alive (kept by autograd for backward), with the lean saves on and
    off, and on under activation checkpointing (no prefetch node may keep a chunk the checkpoint dropped);
    whether each re-gather was prefetched and the gradients match."""
    import gc
    import weakref

    from torch.distributed.fsdp import MixedPrecisionPolicy

    from smdist_launcher.smp.tensor_parallel.lean_saves import REGATHER_ATTR as REGATHER
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    row: dict = {}
    grads = {}
    for name, kw in (("on", {"regather_input": True}), ("off", {"regather_input": False, "recast_weights": False}),
                     ("ac", {"regather_input": True})):
        _options(**kw)
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.transform(copy.deepcopy(base))
        if name == "ac":  # activation checkpointing decides what is kept: the lean saves stand aside
            tsm.apply_activation_checkpointing(model)
        model = tsm.shard_model(model, mp_policy=policy)
        gathered: list = []
        casts: list = []
        recipes: list = []
        for mod in model.modules():
            role = getattr(type(mod), "_smp_tp_role", "")
            if role == "sp_norm":
                mod.register_forward_hook(lambda m, a, out, seen=gathered: seen.append(weakref.ref(out)))
                mod.register_forward_hook(lambda m, a, out, seen=recipes: seen.append(getattr(out, REGATHER, None)))
            elif role in ("col", "row"):
                mod.register_forward_pre_hook(lambda m, a, seen=casts: seen.append(weakref.ref(m.weight)))
        x, y = data(2)[0][0]
        loss = lm_loss(model(x), y)
        gc.collect()
        row[name] = {"gathered_alive": sum(r() is not None for r in gathered), "gathered": len(gathered),
                     "casts_alive": sum(r() is not None for r in casts), "casts": len(casts),
                     "prefetch_nodes": _count_nodes(loss.grad_fn, "PrefetchOnBackward")}
        loss.backward()
        # each re-gather was started early (by the row projection's backward) and waited for at the first unpack
        row[name]["prefetched"] = sum(bool(r is not None and r.prefetched) for r in recipes)
        grads[name] = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
    row["max_grad_diff"] = max(float((grads["on"][n] - grads["off"][n]).abs().max()) for n in grads["on"])
    _options()
    return row


def vocab_parallel() -> dict:
    """One SGD step per mode: loss, per-parameter gradients (DTensor modes) or their norm (FSDP1), the next loss,
    the logits' type and local vocabulary, each against the single-process model (see the module docstring)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from torch.distributed.tensor import DTensor

    from smdist_launcher.smp.reference_causal_lm import GPTForCausalLM
    from smdist_launcher.smp.tensor_parallel import vocab_parallel_loss
    vocab_parallel_loss.CHUNK_ELEMENTS = 100  # 3 of the 16 tokens per float32 chunk: several chunks, a short last one
    torch.manual_seed(2)
    bases = {"untied": GPTForCausalLM(CFG), "tied": GPTForCausalLM(CFG, tied=True)}
    ids = torch.randint(0, CFG.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(9))
    labels = ids.clone()
    labels[0, 2] = -100
    labels[1, 5:] = -100
    items = {"num_items_in_batch": torch.tensor(11)}
    modes = {  # name: (model, wrapper, forward keywords, TPOptions)
        "unit_dp": ("untied", "unit_dp", {}, {}), "unit_dp:items": ("untied", "unit_dp", items, {}),
        "fsdp2": ("untied", "fsdp2", items, {"unit_dp_without_fsdp": False}),
        "fsdp1": ("untied", "fsdp1", {}, {}), "fsdp1-orig": ("untied", "fsdp1-orig", items, {}),
        "ac": ("untied", "ac", {}, {}), "nosp": ("untied", "nosp", items, {}), "tied": ("tied", "unit_dp", items, {}),
        # not covered: the gathered path as before
        "off": ("untied", "unit_dp", {}, {"vocab_parallel_loss": False}),
        "keep": ("untied", "unit_dp", {"logits_to_keep": 1, "shift_labels": labels[:, -1:]}, {}),
    }

    def step(model: torch.nn.Module, kw: dict, clip) -> tuple[float, float, float, torch.Tensor, dict]:
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        out = model(input_ids=ids, labels=labels, **kw)
        out.loss.backward()
        grads = {n.replace("_checkpoint_wrapped_module.", ""): local_grad(p.grad)
                 for n, p in model.named_parameters() if isinstance(p.grad, DTensor) or not hasattr(model, "module")}
        norm = float(clip(model))
        opt.step()
        opt.zero_grad()
        nxt = model(input_ids=ids, labels=labels, **kw).loss
        return float(out.loss), norm, float(nxt), out.logits, grads

    row: dict = {}
    for name, (which, wrapper, kw, options) in modes.items():
        ref = step(copy.deepcopy(bases[which]), kw, lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9))
        _options(**options)
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        model = tsm.transform(copy.deepcopy(bases[which]), sequence_parallel=wrapper != "nosp")
        if wrapper == "ac":
            for i, layer in enumerate(model.layers):
                model.layers[i] = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        if wrapper.startswith("fsdp1"):
            model = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({type(model.layers[0])}),
                                             use_orig_params=wrapper == "fsdp1-orig", device_id=torch.device("cpu"))
        else:
            model = tsm.shard_model(model)
        plain = model(input_ids=ids).logits if name in ("unit_dp", "off") else None  # a call without labels
        evaluated = None
        if name == "unit_dp":  # evaluation (no autograd) with labels: plain full logits for metrics code
            with torch.no_grad():
                ev = model(input_ids=ids, labels=labels)
            plain_eval = type(ev.logits) is torch.Tensor
            evaluated = [type(ev.logits).__name__, ev.logits.shape[-1], float(ev.loss),
                         float((ev.logits - ref[3]).abs().max()) if plain_eval else None]
        got = step(model, kw, lambda m: clip_grad_norm_(m, 1e9))
        logits = got[3]
        full = logits.full_tensor() if isinstance(logits, DTensor) else logits
        row[name] = {"loss": got[0], "ref_loss": ref[0], "norm": got[1], "ref_norm": ref[1], "next": got[2],
                     "ref_next": ref[2], "logits": type(logits).__name__,
                     "local_vocab": (logits.to_local() if isinstance(logits, DTensor) else logits).shape[-1],
                     "logits_diff": float((full - ref[3]).abs().max()),
                     "grads": len(got[4]),
                     "grad_diff": max((float((g - ref[4][n]).abs().max()) for n, g in got[4].items()), default=0.0)}
        if evaluated is not None:
            row[name]["eval"] = evaluated
        if plain is not None:  # the gathered logits, the same with the option on or off
            row[name]["plain"] = [type(plain).__name__, plain.tolist()]
    _options()
    vocab_parallel_loss.CHUNK_ELEMENTS = 1 << 25
    return row


def vocab_parallel_edges() -> dict:
    """The labels HF's loss meets at the edges, against the single-process model: every label ignored (mean over no
    token: a NaN loss, zero gradients), labels outside the vocabulary (HF raises: never a finite loss), and a
    vocabulary that does not divide by the TP degree (untied and tied head; one SGD step with and without labels)."""
    from smdist_launcher.smp.reference_causal_lm import GPTForCausalLM

    def tp(base: torch.nn.Module) -> torch.nn.Module:
        reset_state()
        tsm.init({"tensor_parallel_degree": 2})
        return tsm.shard_model(tsm.transform(copy.deepcopy(base)))

    def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {n: local_grad(p.grad) for n, p in model.named_parameters()}

    torch.manual_seed(2)
    base = GPTForCausalLM(CFG)
    ids = torch.randint(0, CFG.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(9))
    model, ref = tp(base), copy.deepcopy(base)
    # the forward's named parameters (HF's Trainer drops the dataset columns forward does not name)
    row: dict = {"signature": [list(inspect.signature(m.forward).parameters) for m in (model, ref)]}
    for m in (model, ref):  # two micro-batches: one whose labels are all ignored, then a normal one
        m(input_ids=ids, labels=torch.full_like(ids, -100)).loss.backward()
        m(input_ids=ids, labels=ids).loss.backward()
    got, want = grads(model), grads(ref)
    row["ignored"] = {"loss": float(model(input_ids=ids, labels=torch.full_like(ids, -100)).loss),
                      "finite": all(bool(g.isfinite().all()) for g in got.values()),
                      "grad_diff": max(float((got[n] - g).abs().max()) for n, g in want.items())}
    for bad in (CFG.vocab_size, -1):
        labels = ids.clone()
        labels[1, 3] = bad
        model = tp(base)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        row[f"outside{bad}"] = {"loss": float(loss), "head_grad_finite": bool(got_head.isfinite().all())
                                if (got_head := local_grad(model.output.weight.grad)) is not None else None}
    for tied in (False, True):
        torch.manual_seed(2)
        base = GPTForCausalLM(GPTConfig(dim=32, n_layers=1, n_heads=4, vocab_size=63), tied=tied)
        losses = []
        for labels in (None, ids % 63):
            for m in (tp(base), copy.deepcopy(base)):
                opt = torch.optim.SGD(m.parameters(), lr=LR)
                for _ in range(2):
                    out = m(input_ids=ids % 63, labels=labels)
                    loss = out.loss if labels is not None else out.logits.float().pow(2).mean()
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                losses.append(float(loss))
        row["tied" if tied else "untied"] = {"losses": losses[::2], "ref_losses": losses[1::2]}
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
    if "vploss" in which:
        emit(check="vploss", **vocab_parallel())
    if "vpedge" in which:
        emit(check="vpedge", **vocab_parallel_edges())
    extra = {"host": host_work, "mixed": mixed_precision, "lean": lean_saves, "checkpoint": checkpoint}
    for name in which:
        if name in extra:
            emit(check=name, **extra[name](base))
    for name in which:
        if name in ("layout", "recompute", "vploss", "vpedge", *extra):
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
