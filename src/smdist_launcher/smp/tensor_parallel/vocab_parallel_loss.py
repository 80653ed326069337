"""A causal LM's loss over each TP rank's vocabulary slice: the LM head's logits are never all-gathered.

With the vocabulary-parallel LM head (``local_modules``' "head" role) each TP rank computes the logits of its
rows of the vocabulary. Gathering them gave every rank the full ``[batch, seq, vocab]`` logits, their float32
upcast, log-softmax and gradient: the largest tensors of a step, duplicated on every TP rank (issue 30: TP 2 over
2 GPUs peaked 4.3 GiB above FSDP2). Here the loss is Megatron-LM's vocabulary-parallel cross entropy: the
row maximum and the sum of exponentials are all-reduced (MAX, then SUM together with the target's logit, which
only the rank owning that token has), and the backward is ``softmax - onehot`` on the local slice with no
collective (the head's input gradient is summed over the TP ranks by the head's ``CopyToTP``, as before).

``install`` swaps the class of a Hugging Face-style causal LM (transformers >= 4.46: ``forward`` takes ``labels``
and calls ``self.loss_function(logits, labels, vocab_size, **kwargs)``, a property) whose LM head has the "head"
role. A call with ``labels`` that this module reproduces exactly runs the model's own forward with the head
keeping its slice (with autograd on, the logits are a DTensor sharded on the vocabulary over the TP mesh, built on
the slice without a copy: ``outputs.logits.full_tensor()`` gives the full logits; without it, in evaluation, they
are gathered into a plain tensor, as metrics code expects) and ``loss_function`` answering with
``causal_lm_loss``, which is HF's ``ForCausalLMLoss`` (transformers 5.17: labels shifted by one with
``ignore_index`` padding, or ``shift_labels`` as given; float32; mean over the tokens not ignored, or sum /
``num_items_in_batch``). Everything else takes the gathered path unchanged: no labels, ``TPOptions.
vocab_parallel_loss`` off, another loss (``loss_type``, a ``loss_function`` the script set), ``logits_to_keep``
other than 0, logit soft-capping, logits that model code redistributed before its loss (they are gathered and the
model's own loss function runs). Labels outside the vocabulary (other than ``ignore_index``) are not checked
(checking costs a host sync): where HF's cross entropy raises, their tokens' loss and logit gradients are NaN
(never a finite loss that looks right). The TP ranks of a group must all pass labels or all not, as they must pass
the same input ids: a rank without them gathers the logits while the others reduce (a collective mismatch: a hang
until the process group's timeout).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.distributed.tensor import DTensor, Shard

from . import local_modules
from .class_swap import swapped_class
from .collectives import all_reduce

ATTR = "_smp_vocab_parallel_lm"
CAUSAL_LM_LOSS = "ForCausalLMLoss"  # transformers' causal-LM loss (LOSS_MAPPING["ForCausalLM"]), by name


CHUNK_ELEMENTS = 1 << 25  # the float32 work of one step over the logits' rows: 128 MiB


class VocabParallelCrossEntropy(Function):
    """Per-token cross entropy of ``[tokens, local vocab]`` logits whose vocabulary (``vocab`` in all) is split
    over ``group`` (this rank holds columns ``start ..``); 0 for tokens whose target is ``ignore_index``, NaN for
    those whose target is outside the vocabulary (no host sync to raise, as cross entropy does). Float32 math, as HF's
    loss upcasts the logits, done in row chunks: no float32 copy of the whole logits lives at any time. Backward
    keeps only the logits themselves (which the model returns anyway), the row maxima and sums: the softmax is
    recomputed chunk by chunk into the gradient."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, start: int, vocab: int, ignore_index: int,
                group: Any) -> torch.Tensor:
        n_local = logits.shape[-1]
        top = all_reduce(logits.amax(dim=-1).float(), group, "max")  # exact in the logits' own dtype
        valid = target != ignore_index
        outside = valid & ((target < 0) | (target >= vocab))
        shifted = target - start
        inside = valid & (shifted >= 0) & (shifted < n_local)
        idx = shifted.masked_fill(~inside, 0)
        picked = (logits.gather(-1, idx.unsqueeze(-1)).squeeze(-1).float() - top).masked_fill(~inside, 0.0)
        exp_sum = torch.empty_like(top)
        for lo, hi in _chunks(logits):
            exp_sum[lo:hi] = _shifted_exp(logits, top, lo, hi).sum(dim=-1)
        sums = all_reduce(torch.stack((exp_sum, picked)), group)  # one collective for both
        loss = (sums[0].log() - sums[1]).masked_fill(~valid, 0.0).masked_fill(outside, float("nan"))
        ctx.save_for_backward(logits, top, sums[0], idx, inside, valid, outside)
        return loss

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None, None]:
        logits, top, exp_sum, idx, inside, valid, outside = ctx.saved_tensors
        # masked, not multiplied: a mean over no token (every label ignored) sends inf, whose product with 0 is NaN
        grad = grad.masked_fill(~valid, 0.0)
        scale = (grad / exp_sum).masked_fill(outside, float("nan"))
        hit = grad * inside  # minus the one-hot target, where this rank holds it
        out = torch.empty_like(logits)
        for lo, hi in _chunks(logits):
            x = _shifted_exp(logits, top, lo, hi).mul_(scale[lo:hi].unsqueeze(-1))
            x[torch.arange(hi - lo, device=x.device), idx[lo:hi]] -= hit[lo:hi]
            out[lo:hi] = x
        return out, None, None, None, None, None


def _chunks(logits: torch.Tensor) -> list[tuple[int, int]]:
    rows = max(1, CHUNK_ELEMENTS // max(1, logits.shape[-1]))
    n = logits.shape[0]
    return [(lo, min(lo + rows, n)) for lo in range(0, n, rows)]


def _shifted_exp(logits: torch.Tensor, top: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """exp(logits - row max) of rows lo..hi in float32, in a buffer of its own."""
    x = logits[lo:hi].to(torch.float32, copy=True)
    return x.sub_(top[lo:hi].unsqueeze(-1)).exp_()


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor | None, *, start: int, vocab: int, group: Any,
                   num_items_in_batch: torch.Tensor | int | None = None, ignore_index: int = -100,
                   shift_labels: torch.Tensor | None = None) -> torch.Tensor:
    """HF's ``ForCausalLMLoss`` over this rank's vocabulary slice ``logits`` (``[..., local vocab]``, columns from
    ``start``, ``vocab`` in all): the same value and gradients as on the gathered logits."""
    if shift_labels is None:
        assert labels is not None
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]  # tokens < n predict n
    target = shift_labels.reshape(-1).to(logits.device)
    per_token = VocabParallelCrossEntropy.apply(logits.reshape(-1, logits.shape[-1]), target, start, vocab,
                                                ignore_index, group)
    total = per_token.sum()
    if num_items_in_batch is None:
        return total / (target != ignore_index).sum()  # cross_entropy's mean: over the tokens not ignored
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


class VocabParallelLM:
    """One transformed causal LM's vocabulary-parallel loss: its LM head's TP info and whether a forward with
    labels is under way (shared by deep copies, as the head's TP info is)."""

    def __init__(self, head_info: local_modules.TPInfo, labels_at: int | None, keep_at: int | None) -> None:
        self.head_info = head_info
        self.labels_at, self.keep_at = labels_at, keep_at  # positions of labels / logits_to_keep in forward
        self.active = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> VocabParallelLM:
        return self

    def applies(self, model: nn.Module, base_loss: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> bool:
        """Whether this call is one whose loss ``causal_lm_loss`` computes exactly."""
        if not local_modules.OPTIONS.vocab_parallel_loss:
            return False
        if _argument(args, kwargs, "labels", self.labels_at) is None:
            return False
        keep = _argument(args, kwargs, "logits_to_keep", self.keep_at)
        if keep is not None and (type(keep) is not int or keep != 0):
            return False
        if getattr(getattr(model, "config", None), "final_logit_softcapping", None) is not None:
            return False
        return getattr(base_loss, "__name__", "") == CAUSAL_LM_LOSS

    def loss(self, logits: torch.Tensor, labels: torch.Tensor | None, vocab_size: int | None = None,
             num_items_in_batch: torch.Tensor | int | None = None, ignore_index: int = -100,
             shift_labels: torch.Tensor | None = None, *, fallback: Callable[..., torch.Tensor],
             **kwargs: Any) -> torch.Tensor:
        """``loss_function`` during a vocabulary-parallel forward (``ForCausalLMLoss``'s signature)."""
        info = self.head_info
        sharded = (isinstance(logits, DTensor) and logits.device_mesh is info.mesh
                   and tuple(logits.placements) == (Shard(logits.dim() - 1),)
                   and (vocab_size is None or vocab_size == logits.shape[-1]))
        if not sharded:  # model code redistributed the logits (or another vocabulary size): HF's own loss
            full = logits.full_tensor() if isinstance(logits, DTensor) else logits
            return fallback(full, labels, vocab_size, num_items_in_batch=num_items_in_batch,
                            ignore_index=ignore_index, shift_labels=shift_labels, **kwargs)
        return causal_lm_loss(local_modules.local(logits), labels,
                              start=local_modules.vocab_start(logits.shape[-1], info), vocab=logits.shape[-1],
                              group=info.group, num_items_in_batch=num_items_in_batch, ignore_index=ignore_index,
                              shift_labels=shift_labels)


def _gathered_logits(out: Any) -> Any:
    """Evaluation (no autograd: HF Trainer's prediction_step, then compute_metrics' argmax, cat and numpy) gets
    plain full logits: the loss was still computed on the slices, and nothing is kept for a backward."""
    if isinstance(out, tuple):
        if len(out) > 1 and isinstance(out[1], DTensor):  # return_dict=False: (loss, logits, ...)
            return (out[0], out[1].full_tensor(), *out[2:])
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, DTensor):
        out.logits = logits.full_tensor()  # a ModelOutput keeps its mapping in step with the attribute
    return out


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, at: int | None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[at] if at is not None and at < len(args) else None


def _position(forward: Callable[..., Any], name: str) -> int | None:
    """The index in a bound forward's positional arguments (after self) of parameter ``name``."""
    params = list(inspect.signature(forward).parameters.values())[1:]
    for i, p in enumerate(params):
        if p.name == name:
            return i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
    return None


def _eligible(cls: type[nn.Module]) -> bool:
    """A Hugging Face-style causal LM: ``loss_function`` a property, read by a forward that takes ``labels``."""
    if not isinstance(inspect.getattr_static(cls, "loss_function", None), property):
        return False
    forward = inspect.unwrap(cls.forward)
    code = getattr(forward, "__code__", None)
    return (code is not None and "loss_function" in code.co_names
            and "labels" in inspect.signature(cls.forward).parameters)


def _lm_namespace(base: type[nn.Module]) -> dict[str, Any]:
    prop = inspect.getattr_static(base, "loss_function")

    # the model's own signature (inspect follows __wrapped__): HF's Trainer keeps only the dataset columns that
    # forward names, generate() asks it whether forward takes logits_to_keep
    @functools.wraps(base.forward)
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        lm: VocabParallelLM = getattr(self, ATTR)
        if not lm.applies(self, prop.fget(self), args, kwargs):
            return base.forward(self, *args, **kwargs)
        lm.active += 1
        lm.head_info.keep_local += 1
        try:
            out = base.forward(self, *args, **kwargs)
        finally:
            lm.active -= 1
            lm.head_info.keep_local -= 1
        return out if torch.is_grad_enabled() else _gathered_logits(out)

    def get_loss(self: nn.Module) -> Any:
        fn = prop.fget(self)
        lm: VocabParallelLM | None = self.__dict__.get(ATTR)
        if lm is None or not lm.active or getattr(fn, "__name__", "") != CAUSAL_LM_LOSS:
            return fn
        return functools.partial(lm.loss, fallback=fn)

    def set_loss(self: nn.Module, value: Any) -> None:
        if prop.fset is None:
            raise AttributeError(f"{base.__name__}.loss_function cannot be set")
        prop.fset(self, value)

    return {"forward": forward, "loss_function": property(get_loss, set_loss), "_smp_vocab_parallel": True}


def install(model: nn.Module) -> bool:
    """Give ``model`` the vocabulary-parallel loss if it is a causal LM whose direct child LM head has the TP
    "head" role (see the module docstring); returns whether it did."""
    heads = [m for m in model.children() if getattr(type(m), "_smp_tp_role", "") == "head"]
    if len(heads) != 1 or not _eligible(type(model)):
        return False
    info: local_modules.TPInfo = getattr(heads[0], local_modules.TP_ATTR)
    if info.mesh is None:
        return False
    base = type(model)
    forward = base.forward
    setattr(model, ATTR, VocabParallelLM(info, _position(forward, "labels"), _position(forward, "logits_to_keep")))
    # the model's own name (HF writes it into config.architectures on save_pretrained)
    model.__class__ = swapped_class(base, "vocab_parallel_lm", lambda: _lm_namespace(base))
    return True
