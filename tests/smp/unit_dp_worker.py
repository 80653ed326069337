"""Runs under torchrun (2 ranks, gloo): ``tsm.shard_model`` with TP 2 over both ranks (unit_dp: mixed precision
without FSDP2) against FSDP2 over the one-rank data-parallel mesh (``unit_dp_without_fsdp`` off), step by step.

Checks (one ``RESULT {json}`` line each on rank 0; tests/smp/test_unit_dp.py asserts on them), each the largest
difference of the losses and the unsharded gradients between the two (0.0: the same bits), or an error:
- ``zero_between``: ``optimizer.zero_grad()`` between a forward and its backward;
- ``requires_grad``: parameters frozen after the first step, others unfrozen after it;
- ``tied``: an embedding tied to the LM head under bf16 parameters;
- ``root_buffer``: a root that adds a float32 buffer to the embeddings before the blocks (bf16 parameters);
- ``twice``: a second ``shard_model`` on the same model (FSDP2 refuses it);
- ``deepcopy``: a deep copy of the model made after a step trains as the model itself goes on (unit_dp alone).
"""
from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy

import smdist_launcher.smp as tsm
from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state
from smdist_launcher.smp.tensor_parallel import local_modules

CFG = GPTConfig(dim=32, n_layers=2, n_heads=4, vocab_size=64)
BF16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    tokens = [torch.randint(0, CFG.vocab_size, (2, 9), generator=g) for _ in range(n)]
    return [(t[:, :-1], t[:, 1:]) for t in tokens]


def build(base: nn.Module, unit_dp: bool, policy: MixedPrecisionPolicy | None) -> nn.Module:
    local_modules.OPTIONS = local_modules.TPOptions(unit_dp_without_fsdp=unit_dp)
    reset_state()
    tsm.init({"tensor_parallel_degree": 2})
    return tsm.shard_model(tsm.transform(copy.deepcopy(base)), mp_policy=policy)


def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.full_tensor().clone() for n, p in model.named_parameters() if p.grad is not None}


Trace = tuple[list[float], list[dict[str, torch.Tensor]]]


def train(model: nn.Module, opt: torch.optim.Optimizer, zero_before_backward: bool = False,
          before_step: Callable[[int], None] | None = None) -> Trace:
    """Three steps; ``zero_before_backward``: forward, zero_grad, backward, step (else zero_grad after the step);
    ``before_step(i)`` runs before step i's forward."""
    losses, seen = [], []
    for i, (x, y) in enumerate(batches(3)):
        if before_step is not None:
            before_step(i)
        loss = lm_loss(model(x), y)
        if zero_before_backward:
            opt.zero_grad()
        loss.backward()
        seen.append(grads(model))
        opt.step()
        if not zero_before_backward:
            opt.zero_grad()
        losses.append(loss.item())
    return losses, seen


def train_plain(model: nn.Module) -> Trace:
    return train(model, torch.optim.AdamW(model.parameters(), lr=1e-2))


def train_zero_between(model: nn.Module) -> Trace:
    """The order of many scripts: forward, zero_grad, backward, step (the previous step's gradients dropped
    after this forward)."""
    return train(model, torch.optim.SGD(model.parameters(), lr=0.5), zero_before_backward=True)


def train_requires_grad(model: nn.Module) -> Trace:
    """A norm weight and a projection frozen for the first step, unfrozen after it; another norm weight and
    projection trained in the first step, frozen after it."""
    later = [model.layers[0].attention_norm.weight, model.layers[0].attention.wq.weight]
    first = [model.layers[1].ffn_norm.weight, model.layers[1].feed_forward.w1.weight]
    for p in later:
        p.requires_grad_(False)

    def swap(step: int) -> None:
        if step == 1:
            for p in later:
                p.requires_grad_(True)
            for p in first:
                p.requires_grad_(False)

    return train(model, torch.optim.SGD(model.parameters(), lr=0.5), before_step=swap)


class RootBuffer(nn.Module):
    """The GPT with a float32 buffer added to the embeddings in the root: the blocks' input is float32 by type
    promotion, which FSDP2 casts to ``param_dtype`` at each block (cast_forward_inputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.gpt = GPT(CFG)
        self.register_buffer("pos", torch.randn(16, CFG.dim) * 0.1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.gpt.tok_embeddings(tokens) + self.pos[: tokens.shape[1]]
        for layer in self.gpt.layers:
            h = layer(h)
        return self.gpt.output(self.gpt.norm(h))


def tied_gpt() -> nn.Module:
    model = GPT(CFG)
    model.output.weight = model.tok_embeddings.weight
    return model


def compare(base: nn.Module, policy: MixedPrecisionPolicy | None, train: Callable[[nn.Module], Trace]) -> Any:
    """The largest difference between unit_dp and FSDP2 (losses and gradients of every step), or the error."""
    runs = []
    for unit_dp in (True, False):
        try:
            runs.append(train(build(base, unit_dp, policy)))
        except Exception as exc:  # noqa: BLE001 -- reported as the check's result
            return f"{'unit_dp' if unit_dp else 'fsdp2'}: {type(exc).__name__}: {str(exc)[:300]}"
    (ulosses, ugrads), (flosses, fgrads) = runs
    worst = max(abs(a - b) for a, b in zip(ulosses, flosses, strict=True))
    for u, f in zip(ugrads, fgrads, strict=True):
        if sorted(u) != sorted(f):
            return {"only_unit_dp": sorted(set(u) - set(f)), "only_fsdp2": sorted(set(f) - set(u))}
        worst = max(worst, *(float((u[k] - f[k]).abs().max()) for k in u))
    return worst


def twice(base: nn.Module) -> str:
    model = build(base, True, BF16)
    try:
        tsm.shard_model(model, mp_policy=BF16)
    except RuntimeError as exc:
        return f"{exc} | class {type(model).__name__} of {type(base).__name__}"
    return f"accepted: {type(model).__name__}"


def deep_copy(base: nn.Module) -> float:
    model = build(base, True, BF16)
    (x, y), *rest = batches(3)
    lm_loss(model(x), y).backward()
    model.zero_grad()
    copied = copy.deepcopy(model)
    traces = []
    for m in (copied, model):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        losses = []
        for x, y in rest:
            loss = lm_loss(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        traces.append(losses)
    return max(abs(a - b) for a, b in zip(*traces, strict=True))


def emit(**row: Any) -> None:
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(row), flush=True)


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    base = GPT(CFG)
    torch.manual_seed(0)
    tied = tied_gpt()
    torch.manual_seed(0)
    root_buffer = RootBuffer()
    checks: dict[str, Callable[[], Any]] = {
        "zero_between": lambda: compare(base, BF16, train_zero_between),
        "requires_grad": lambda: compare(base, None, train_requires_grad),
        "tied": lambda: compare(tied, BF16, train_plain),
        "root_buffer": lambda: compare(root_buffer, BF16, train_plain),
        "twice": lambda: twice(base),
        "deepcopy": lambda: deep_copy(base),
    }
    for name in sys.argv[1].split(","):
        emit(check=name, value=checks[name]())
    local_modules.OPTIONS = local_modules.TPOptions()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
