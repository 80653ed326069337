"""AWS's shared SMP v2 training-script flow on a small Hugging Face model (GPT-NeoX or Llama), under torchrun.

    tsm.init -> build (under init_empty_weights when --delayed) -> [LlamaFlashAttention swap] -> tsm.transform
    -> FSDP1 (AWS's keywords, DelayedParamIniter's init fns) or FSDP2 (fully_shard per block)
    -> activation checkpointing -> AdamW -> tsm's clip_grad_norm_ -> a few steps.

Prints ``RESULT {json}`` on rank 0 with the losses; runs on GPUs (nccl) or CPU (gloo). Needs ``transformers``.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import time
import traceback

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.delayed_param import DelayedParamIniter, init_empty_weights
from torch.sagemaker.grad_norm import clip_grad_norm_
from torch.sagemaker.tensor_parallel.transformer import TransformerLayer

SEQ, STEPS = 32, 4


def small_config(kind: str):
    import transformers
    if kind == "neox":
        return transformers.GPTNeoXConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=256, max_position_embeddings=128,
                                          use_parallel_residual=True)
    # grouped-query attention (2 query heads per k/v head) with whole k/v heads on each of 4 TP ranks
    return transformers.LlamaConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                                    num_key_value_heads=4, intermediate_size=128, max_position_embeddings=128)


def build(kind: str, delayed: bool, flash: bool) -> torch.nn.Module:
    def ctx() -> contextlib.AbstractContextManager[None]:
        return init_empty_weights() if delayed else contextlib.nullcontext()

    if kind == "gpt":  # called as a Hugging Face causal LM (labels): the vocabulary-parallel loss under TP
        from smdist_launcher.smp.reference_causal_lm import GPTForCausalLM
        from smdist_launcher.smp.reference_models import GPTConfig
        with ctx():
            return GPTForCausalLM(GPTConfig(dim=64, n_layers=2, n_heads=4, vocab_size=256))
    from transformers import AutoModelForCausalLM
    with ctx():
        model = AutoModelForCausalLM.from_config(small_config(kind))
    if flash:
        from torch.sagemaker.nn.huggingface.llama_flashattn import LlamaFlashAttention
        for layer in model.model.layers:
            old = layer.self_attn
            with ctx():
                layer.self_attn = LlamaFlashAttention(model.config)
            layer.self_attn.layer_idx = getattr(old, "layer_idx", None)
            if not delayed:
                with torch.no_grad():
                    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                        getattr(layer.self_attn, name).weight.copy_(getattr(old, name).weight)
    return model


MATRIX = [  # name: worker arguments (AWS's modes: TP/delayed params/use_orig_params/FSDP1 or FSDP2)
    ("tp2-fsdp1", []), ("tp2-fsdp1-delayed", ["--delayed"]), ("tp2-fsdp1-orig", ["--orig-params"]),
    ("tp2-fsdp1-delayed-orig", ["--delayed", "--orig-params"]), ("tp2-fsdp1-nosp", ["--no-sp"]),
    ("tp2-fsdp2", ["--flow", "fsdp2"]), ("tp2-fsdp2-delayed", ["--flow", "fsdp2", "--delayed"]),
    ("tp1-hsd2-fsdp1", ["--tp", "1", "--hsd", "2"]),
    ("tp2-fsdp1-reentrant", ["--reentrant"]),  # AWS's scripts checkpoint with CheckpointImpl.REENTRANT
    ("tp2-fsdp1-offload", ["--reentrant", "--offload"]),  # and offload it when sm_activation_offloading is on
]
MATRIX_4 = [  # 4 ranks (--matrix all4): TP 4 (sequence parallelism over the sequence: batch 2 < 4), TP 2 x HSDP 2
    ("tp4-fsdp1", ["--tp", "4"]), ("tp4-fsdp2", ["--tp", "4", "--flow", "fsdp2"]),
    ("tp2-hsd2-fsdp1", ["--hsd", "2"]), ("tp2-hsd2-fsdp1-orig", ["--hsd", "2", "--orig-params"]),
    ("tp2-hsd2-fsdp2", ["--hsd", "2", "--flow", "fsdp2"]),
]
SELECTIONS = {"all": MATRIX, "all4": MATRIX_4}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("neox", "llama", "gpt"), default="neox")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--hsd", type=int, default=1, help="hybrid_shard_degree")
    ap.add_argument("--delayed", action="store_true")
    ap.add_argument("--flash", action="store_true", help="swap in SMP's LlamaFlashAttention")
    ap.add_argument("--flow", choices=("fsdp1", "fsdp2"), default="fsdp1")
    ap.add_argument("--orig-params", action="store_true", help="FSDP1 use_orig_params=True")
    ap.add_argument("--no-sp", action="store_true", help="transform without sequence parallelism")
    ap.add_argument("--fp32", action="store_true", help="no mixed precision (exact comparisons)")
    ap.add_argument("--reentrant", action="store_true", help="activation checkpointing with CheckpointImpl.REENTRANT")
    ap.add_argument("--offload", action="store_true", help="sm_activation_offloading + offload_wrapper")
    ap.add_argument("--matrix", default="",
                    help="comma-separated MATRIX names (or 'all', 'all4') run one after another")
    return ap.parse_args(argv)


def run(args: argparse.Namespace, device: torch.device) -> list[float]:
    from smdist_launcher.smp.state import reset_state
    reset_state()
    tsm.init({"tensor_parallel_degree": args.tp, "hybrid_shard_degree": args.hsd, "random_seed": 7,
              "sm_activation_offloading": args.offload})
    torch.manual_seed(7)
    model = build(args.model, args.delayed, args.flash)
    model = tsm.transform(model, sequence_parallel=not args.no_sp)
    dtype = torch.float32 if args.fp32 else torch.bfloat16
    if args.flow == "fsdp1":
        initer = DelayedParamIniter(model) if args.delayed else None
        ctx = initer.validate_params_and_buffers_inited() if initer else contextlib.nullcontext()
        with ctx:
            model = FullyShardedDataParallel(
                model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                          transformer_layer_cls={TransformerLayer}),
                mixed_precision=MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, buffer_dtype=torch.float32),
                sharding_strategy=ShardingStrategy.HYBRID_SHARD, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
                forward_prefetch=True, limit_all_gathers=True, device_id=device,
                use_orig_params=args.orig_params, param_init_fn=initer.get_param_init_fn() if initer else None,
                post_param_init_fn=initer.get_post_param_init_fn() if initer else None, sync_module_states=False)
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy
        policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        if not args.delayed:
            model = model.to(device)
        tsm.shard_model(model, mp_policy=policy)
        if args.delayed:
            tsm.materialize(model, device)
            if hasattr(model, "tie_weights"):
                model.tie_weights()
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(
            checkpoint_wrapper,
            checkpoint_impl=CheckpointImpl.REENTRANT if args.reentrant else CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, TransformerLayer))
    if args.offload:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import offload_wrapper
        model = offload_wrapper(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(11 + tsm.state.dp_rank)
    losses = []
    for _ in range(STEPS):
        ids = torch.randint(0, 256, (2, SEQ + (args.model == "gpt")), generator=g).to(device)
        loss = forward_loss(model, ids, args.model)
        loss.backward()
        norm = clip_grad_norm_(model, 1.0)
        if not torch.isfinite(torch.as_tensor(float(norm))):
            raise RuntimeError(f"non-finite gradient norm {float(norm)}")
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach().float().item()))
    if args.flow == "fsdp1" and args.tp > 1:
        check_sharded_round_trip(model, opt, ids, args.model)
    return losses


def check_sharded_round_trip(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor,
                             kind: str) -> None:
    """FSDP1 over local TP pieces: a SHARDED checkpoint (one DCP folder per TP rank) saved, the model moved on one
    step, then loaded back gives the saved model's loss again (a TP rank reading another's piece would not)."""
    import tempfile

    from torch.distributed.fsdp import StateDictType
    from torch.sagemaker.distributed.fsdp.checkpoint import load_model_checkpoint, save_model_checkpoint

    folder = [tempfile.mkdtemp(prefix="smp-tp-ckpt-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(folder)
    path = os.path.join(folder[0], "sharded")
    with torch.no_grad():
        before = float(forward_loss(model, ids, kind).float())
    save_model_checkpoint(model, StateDictType.SHARDED_STATE_DICT, path)
    forward_loss(model, ids, kind).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        moved = float(forward_loss(model, ids, kind).float())
    load_model_checkpoint(model, StateDictType.SHARDED_STATE_DICT, path)
    with torch.no_grad():
        after = float(forward_loss(model, ids, kind).float())
    # a FULL checkpoint is written whole (gathered across TP ranks); loading it back into the pieces is refused
    full = os.path.join(folder[0], "full")
    save_model_checkpoint(model, StateDictType.FULL_STATE_DICT, full)
    try:
        load_model_checkpoint(model, StateDictType.FULL_STATE_DICT, full)
    except NotImplementedError:
        pass
    else:
        raise AssertionError("loading a FULL checkpoint into FSDP1 over TP pieces was not refused")
    dist.barrier()
    if dist.get_rank() == 0:
        import shutil
        shutil.rmtree(folder[0], ignore_errors=True)
    if moved == before or abs(after - before) > 1e-4 * max(1.0, abs(before)):
        raise AssertionError(f"sharded checkpoint round trip: loss {before} saved, {moved} moved, {after} loaded")


def forward_loss(model: torch.nn.Module, ids: torch.Tensor, kind: str) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def emit(row: dict) -> None:
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(row), flush=True)


def main() -> None:
    args = parse()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    if not args.matrix:
        emit({"check": "train", "losses": run(args, device), **vars(args)})
    else:
        known = dict(MATRIX + MATRIX_4)
        names = [n for n, _ in SELECTIONS[args.matrix]] if args.matrix in SELECTIONS else args.matrix.split(",")
        extra = ["--model", args.model, *(["--flash"] if args.flash else []), *(["--fp32"] if args.fp32 else [])]
        for name in names:
            case = parse([*extra, *known[name]])
            t0 = time.perf_counter()
            try:
                row = {"check": name, "ok": True, "losses": run(case, device)}
            except Exception as exc:  # noqa: BLE001 -- the next configuration still runs; the failure is reported
                traceback.print_exc()  # into the check's log: where it failed, not only what
                row = {"check": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            row["s"] = round(time.perf_counter() - t0, 2)
            emit(row)
            gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
