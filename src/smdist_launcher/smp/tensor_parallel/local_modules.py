"""Tensor parallelism with plain local tensors inside the blocks: DTensor only for the parameters.

``tsm.transform`` shards each projection's parameters as DTensors on the TP mesh (so FSDP2, DCP checkpoints
and ``clip_grad_norm_`` see where each piece belongs) and swaps the module's class for one whose forward takes
the local shards and runs plain matmuls with one explicit collective per boundary (Megatron-LM's layout):

- column-parallel projections (q/k/v, MLP up/gate): weight and bias sharded on the output dimension;
- row-parallel projections (attention output, MLP down): weight sharded on the input dimension, the partial
  outputs summed (all-reduce; with sequence parallelism reduce-scattered over the sequence);
- sequence parallelism: the residual stream between blocks is split over the tokens; each block norm runs on
  its chunk and all-gathers its output; the first block splits its input and the last block gathers its output,
  so masks, positions, the final norm and the loss see the whole batch as the model's own code expects. The
  split is over the batch (dimension 0: contiguous chunks, no cat/chunk copies) when the batch divides by the TP
  degree, else over the sequence (batch 1, long context): norms, residual adds and dropout act per token, so
  which tokens a rank holds does not matter as long as split, gather and reduce-scatter agree (the first block
  decides per forward, ``SPLayout``); when neither divides (a decoding step of one token, batch 1) that forward
  does not split: every rank keeps every token, row outputs are all-reduced;
- the parameters whose gradients are partial sums under sequence parallelism (norm weights/biases, row-parallel
  biases) go through one ``CopyToTPGrouped`` per block: one all-reduce of the block's flattened partial gradients
  inside backward, before the block's gradients reach FSDP (FSDP1, FSDP2, gradient accumulation unchanged);
- vocabulary-parallel embedding and LM head (rows of the vocabulary per rank; logits all-gathered, except for a
  causal LM's loss with labels, computed over each rank's slice: ``vocab_parallel_loss``); an embedding whose rows
  do not divide by the TP degree, and a head tied to it, stay replicated (an untied head takes unequal slices).

The host runs a handful of Python calls per block instead of DTensor's dispatch and redistribution per op.
A DTensor parameter's local shard comes through ``LocalShard`` (its gradient wrapped back without
``DTensor.from_local``); ``lean_saves`` decides what the projections keep for backward, ``async_tp`` fuses the
row projections with their collectives (off: did not pay), ``unit_dp`` replaces FSDP2 over a one-rank mesh.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

from . import async_tp, lean_saves
from .class_swap import swapped_class
from .collectives import (
    CopyToTP,
    CopyToTPGrouped,
    GatherFromSP,
    GatherToReplicated,
    ReduceFromTP,
    ReduceScatterToSP,
    SplitToSP,
)

SEQ_DIM = 1  # batch-first activations (Hugging Face, torchtitan)
BATCH_DIM = 0
TP_ATTR = "_smp_tp"
BLOCK_ATTR = "_smp_tp_block"


@dataclass
class TPOptions:
    """Switches for the benchmark's ablation; the defaults are what paid on 2x H100 (issue 30: 1.3B, 6.7B s8k)."""

    batch_split_sp: bool = True  # sequence parallelism over the batch dimension when it divides
    grouped_partial_grads: bool = True  # one all-reduce per block for the partial gradients, not one per tensor
    fast_local: bool = True  # a parameter's local shard through LocalShard (no DTensor.from_local per gradient)
    unit_dp_without_fsdp: bool = True  # shard_model over a one-rank data-parallel mesh: casts, no FSDP2 (unit_dp)
    recast_weights: bool = True  # unit_dp's bf16 weight casts not kept for backward: cast again (lean_saves)
    # a causal LM called with labels: the loss over each rank's vocabulary slice, logits not all-gathered
    vocab_parallel_loss: bool = True
    # Measured, did not pay (off): the re-gather cost 8-10 % of the 1.3B step and did not lower its peak (the
    # logits and loss set it); async TP was faster in one run and slower in another, and slower at 6.7B s8k.
    regather_input: bool = False  # column projections keep the SP chunk, all-gather it again in backward
    async_tp: bool = False  # CUDA, one host: row projections' matmul fused with their collectives (async_tp)


OPTIONS = TPOptions()


class SPLayout:
    """Which dimension the residual stream is split along in the current forward, and the full (batch, seq) shape:
    set by the first block's input split, read by every norm gather and row reduce-scatter of the model (their
    autograd functions keep the dimension for backward). Shared by every module of one transformed model.

    An activation-checkpoint recompute runs a block's forward again during backward, after later forwards may have
    chosen another split (micro-batches of other shapes, an evaluation in between): ``follow`` ties the split to
    each block's and SP module's input tensor and takes it back when a recompute sees that tensor again (the same
    object without reentrancy, a detached alias of it with), so the recompute gathers and reduce-scatters as its
    forward did. Shapes alone cannot tell: a (1, 8) chunk is batch 2 split over the batch or batch 1 seq 16 split
    over the sequence."""

    def __init__(self) -> None:
        self.dim: int | None = SEQ_DIM  # None: this forward is not split (neither batch nor sequence divides)
        self.full: tuple[int, int] | None = None
        self.regather: lean_saves.Regather | None = None  # the last SP norm's, until the next row projection
        # (data_ptr, shape, stride) -> (the tensor, weakly; its forward's dim and full shape)
        self._seen: dict[tuple[int, torch.Size, tuple[int, ...]],
                         tuple[weakref.ref[torch.Tensor], int | None, tuple[int, int] | None]] = {}

    def choose(self, x: torch.Tensor, size: int) -> int | None:
        if OPTIONS.batch_split_sp and x.shape[0] % size == 0:
            self.dim = BATCH_DIM
        else:
            self.dim = SEQ_DIM if x.shape[1] % size == 0 else None
        self.full = (x.shape[0], x.shape[1])
        # entries of tensors gone (their forward and backward are over) can't be hit again: drop them
        self._seen = {k: v for k, v in self._seen.items() if v[0]() is not None}
        return self.dim

    def follow(self, x: torch.Tensor) -> None:
        """Record the current split for ``x``, or restore the split recorded for a live tensor at the same memory
        (a recompute of the forward that recorded it: no two live tensors of different forwards share memory)."""
        if torch.compiler.is_compiling() or type(x) is not torch.Tensor or x.is_meta or x.numel() == 0:
            return  # traced, or no memory of its own to know it by (subclasses, meta): the current split holds
        key = (x.data_ptr(), x.shape, x.stride())
        seen = self._seen.get(key)
        if seen is not None and seen[0]() is not None:
            _, self.dim, self.full = seen
        else:
            self._seen[key] = (weakref.ref(x), self.dim, self.full)

    def gather_dim(self, chunk: torch.Tensor, size: int) -> int | None:
        """The split dimension, checked against the chunk (a recompute whose input could not be followed, e.g.
        copied back from an offload, after a forward of another shape would gather along the wrong dimension)."""
        if self.full is not None:
            b, s = chunk.shape[0], chunk.shape[1]
            expected = (b * size, s) if self.dim == BATCH_DIM else (b, s * size) if self.dim == SEQ_DIM else (b, s)
            if expected != self.full:
                raise RuntimeError(f"smp: sequence-parallel chunk of shape {tuple(chunk.shape)} does not match this "
                                   f"forward's batch {self.full} split along dimension {self.dim} (a recompute "
                                   "after a forward of another batch shape?)")
        return self.dim

    def __deepcopy__(self, memo: dict[int, Any]) -> SPLayout:
        return self


class TPInfo:
    """What a swapped module's forward needs; shared by reference (deepcopy keeps the process group)."""

    def __init__(self, group: Any, rank: int, size: int, sp: bool, copy_input: bool = False,
                 layout: SPLayout | None = None, mesh: DeviceMesh | None = None) -> None:
        self.group, self.rank, self.size, self.sp, self.copy_input = group, rank, size, sp, copy_input
        self.layout = layout or SPLayout()
        self.mesh = mesh  # the LM head's: its vocabulary-sharded logits are DTensors on it
        self.keep_local = 0  # the LM head inside a vocabulary-parallel loss's forward: logits not gathered

    def __deepcopy__(self, memo: dict[int, Any]) -> TPInfo:
        return self


class LocalShard(torch.autograd.Function):
    """``DTensor.to_local`` of a parameter whose gradient keeps the parameter's placements (Shard/Replicate, never
    Partial): the backward wraps the local gradient with the parameter's spec directly, where ``to_local``'s
    backward went through ``DTensor.from_local`` (spec copies and checks, ~15x the host time) for every sharded
    parameter of every block in every backward."""

    @staticmethod
    def forward(ctx: Any, t: DTensor) -> torch.Tensor:
        ctx.spec = t._spec
        ctx.stride = t._local_tensor.stride()
        ctx.set_materialize_grads(False)
        local_t = t._local_tensor
        return local_t.view_as(local_t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> DTensor | None:
        if grad is None:
            return None
        spec = ctx.spec
        if grad.stride() == ctx.stride:
            return DTensor(grad, spec, requires_grad=False)
        return DTensor.from_local(grad, spec.mesh, spec.placements, run_check=False, shape=spec.shape,
                                  stride=spec.stride)


def local(t: torch.Tensor) -> torch.Tensor:
    if not isinstance(t, DTensor):
        return t
    if OPTIONS.fast_local and not any(p.is_partial() for p in t.placements):
        return LocalShard.apply(t)
    return t.to_local()


def _info(module: nn.Module) -> TPInfo:
    return getattr(module, TP_ATTR)


def _col_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    info = _info(self)
    if info.copy_input:
        x = CopyToTP.apply(x, info.group)
    return lean_saves.linear(x, local(self.weight), None if self.bias is None else local(self.bias))


def _row_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    info = _info(self)
    if info.sp:
        info.layout.follow(x)  # a recompute starting at this module (submodule checkpointing)
    dim = info.layout.dim if info.sp else None
    if dim is not None and OPTIONS.async_tp and async_tp.usable(x, info.group):
        y = lean_saves.linear(x, local(self.weight), None, f=async_tp.row_linear(dim, info.group))
    elif dim is not None:
        y = ReduceScatterToSP.apply(lean_saves.linear(x, local(self.weight), None), dim, info.group)
    else:
        y = ReduceFromTP.apply(lean_saves.linear(x, local(self.weight), None), info.group)
    regather, info.layout.regather = info.layout.regather, None
    if dim is not None and regather is not None and regather.packs:
        # the norm gathered for this sublayer's column projections, which packed the chunk (not under activation
        # checkpointing: there the node would keep the chunk the checkpoint dropped): gather it early in backward
        y = lean_saves.PrefetchOnBackward.apply(y, regather)
    if self.bias is not None:
        # With sequence parallelism each rank adds the bias to its chunk only: its gradient is partial, summed
        # over the TP ranks by the block's CopyToTPGrouped (the block's pre-forward hook put it in place).
        y = y + local(self.bias)
    return y


def _head_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    info = _info(self)
    x = CopyToTP.apply(x, info.group)
    y = lean_saves.linear(x, local(self.weight), None if self.bias is None else local(self.bias))
    if info.keep_local:  # the caller computes the loss over each rank's vocabulary slice (vocab_parallel_loss)
        return sharded_logits(y, self.out_features, info)
    if self.out_features % info.size:  # unequal slices (ceil-sized): DTensor's padded all-gather
        return sharded_logits(y, self.out_features, info).full_tensor()
    return GatherToReplicated.apply(y, y.dim() - 1, info.group)


def vocab_start(vocab: int, info: TPInfo) -> int:
    """The first vocabulary row of this rank's head (and embedding) shard: DTensor's Shard(0) chunks (ceil-sized,
    the last ones shorter or empty when the vocabulary does not divide)."""
    return min(info.rank * -(-vocab // info.size), vocab)


def sharded_logits(y: torch.Tensor, vocab: int, info: TPInfo) -> DTensor:
    """This rank's logits slice as the full logits' DTensor (Shard on the vocabulary over the TP mesh), no copy:
    ``full_tensor()`` gathers them; gradients flow back to the slice."""
    assert info.mesh is not None
    shape = (*y.shape[:-1], vocab)
    stride: list[int] = []
    step = 1
    for size in reversed(shape):  # the full logits' contiguous strides
        stride.insert(0, step)
        step *= size
    return DTensor.from_local(y, info.mesh, [Shard(y.dim() - 1)], run_check=False, shape=torch.Size(shape),
                              stride=tuple(stride))


def _embedding_forward(self: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    info = _info(self)
    w = local(self.weight)
    start = info.rank * w.shape[0]
    outside = (ids < start) | (ids >= start + w.shape[0])
    pad = self.padding_idx
    pad_local = pad - start if pad is not None and start <= pad < start + w.shape[0] else None
    out = F.embedding((ids - start).masked_fill(outside, 0), w, pad_local, self.max_norm, self.norm_type,
                      self.scale_grad_by_freq, self.sparse)
    return ReduceFromTP.apply(out.masked_fill(outside.unsqueeze(-1), 0), info.group)


_PARAM_NAMES = ("weight", "bias")


def _swap_tensor(module: nn.Module, name: str, value: torch.Tensor | None) -> tuple[str, Any]:
    """Put ``value`` where ``module.name`` is read from (FSDP keeps parameters in _parameters or, for FSDP1's flat
    views, in __dict__); returns what to restore. An instance attribute shadows _parameters: FSDP1 with
    use_orig_params puts the unsharded views in __dict__ for the forward while _parameters keeps the sharded
    Parameter, so __dict__ is looked at first."""
    if name not in module.__dict__ and name in module._parameters:
        old = module._parameters[name]
        module._parameters[name] = value  # type: ignore[assignment]
        return "p", old
    old = module.__dict__.get(name)
    module.__dict__[name] = value
    return "d", old


def _restore(module: nn.Module, name: str, saved: tuple[str, Any]) -> None:
    where, old = saved
    if where == "p":
        module._parameters[name] = old
    elif old is None:
        module.__dict__.pop(name, None)
    else:
        module.__dict__[name] = old


def _sp_norm_forward(base: type[nn.Module], self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    # The norm sees this rank's chunk of the tokens: its parameters' gradients are partial sums, summed over the
    # TP ranks by the block's CopyToTPGrouped (put in place by the block's pre-forward hook).
    info = _info(self)
    hidden = _find_hidden(args, kwargs)
    if hidden is not None:
        info.layout.follow(hidden)
    out = base.forward(self, *args, **kwargs)
    dim = info.layout.gather_dim(out, info.size)
    if dim is None:  # an unsplit forward: the column-parallel consumers' input gradients are partial sums
        return CopyToTP.apply(out, info.group)
    full = GatherFromSP.apply(out, dim, info.group)
    if OPTIONS.regather_input:
        info.layout.regather = lean_saves.mark_gathered(full, out, dim, info.group)
    return full


class BlockTP:
    """A block's tensor-parallel parameters. Its forward pre-hook puts plain tensors where the block's modules read
    their parameters: the local shard of each DTensor parameter, and the partial-gradient parameters (SP norms,
    row-parallel biases) through one ``CopyToTPGrouped``; the forward hook (always called) puts the originals
    back before FSDP reshards. Inside the block's forward no DTensor is left (what ``torch.compile`` needs).
    Which modules hold them is found by walking the block once (through any FSDP/checkpoint wrapper inside) and
    kept while the hook sees the same block object."""

    def __init__(self, group: Any, layout: SPLayout | None = None, follow: bool = False) -> None:
        self.group = group
        self.layout = layout  # with sequence parallelism
        self.follow = follow  # the blocks after the first (the first one's split decides afresh)
        self._block: nn.Module | None = None
        self.partial: list[tuple[nn.Module, str]] = []
        self.sharded: list[tuple[nn.Module, str]] = []
        self.saved: list[list[tuple[nn.Module, str, tuple[str, Any]]]] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> BlockTP:
        return BlockTP(self.group, self.layout, self.follow)  # finds the copy's modules at its first forward

    def _resolve(self, block: nn.Module) -> None:
        partial: list[tuple[nn.Module, str]] = []
        sharded: list[tuple[nn.Module, str]] = []
        for mod in block.modules():
            role = getattr(type(mod), "_smp_tp_role", "")
            if role == "sp_norm":
                partial += [(mod, n) for n in _PARAM_NAMES if isinstance(getattr(mod, n, None), torch.Tensor)]
            elif role == "row" and _info(mod).sp and isinstance(getattr(mod, "bias", None), torch.Tensor):
                partial.append((mod, "bias"))
            sharded += [(mod, n) for n in _SHARDED_PARAMS.get(role, ())
                        if isinstance(getattr(mod, n, None), torch.Tensor)]
        self._block, self.partial, self.sharded = block, partial, sharded

    def pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._block is not module:
            self._resolve(module)
        if self.follow and self.layout is not None and (hidden := _find_hidden(args, kwargs)) is not None:
            self.layout.follow(hidden)  # a recompute of this block takes its forward's split back
        swaps: list[tuple[nn.Module, str, tuple[str, Any]]] = []
        pieces = [(m, n, t) for m, n in self.partial if isinstance(t := getattr(m, n, None), torch.Tensor)]
        # an unsplit forward computes the whole gradient on every rank: nothing to sum
        if pieces and (self.layout is None or self.layout.dim is not None):
            tensors = [local(t) for _, _, t in pieces]
            if OPTIONS.grouped_partial_grads:
                copies = CopyToTPGrouped.apply(self.group, *tensors)
            else:
                copies = [CopyToTP.apply(t, self.group) for t in tensors]
            swaps += [(m, n, _swap_tensor(m, n, c)) for (m, n, _), c in zip(pieces, copies, strict=True)]
        for m, n in self.sharded:
            t = getattr(m, n, None)
            if isinstance(t, DTensor):
                swaps.append((m, n, _swap_tensor(m, n, local(t))))
        self.saved.append(swaps)

    def post_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if self.saved:
            for m, n, old in reversed(self.saved.pop()):
                _restore(m, n, old)


def _role_namespace(base: type[nn.Module], role: str) -> dict[str, Any]:
    forwards: dict[str, Callable[..., Any]] = {"col": _col_forward, "row": _row_forward, "head": _head_forward,
                                               "embed": _embedding_forward}
    if role == "sp_norm":
        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            return _sp_norm_forward(base, self, *args, **kwargs)
    else:
        forward = forwards[role]
    return {"forward": forward, "_smp_tp_role": role, "__module__": __name__}


def _set_role(module: nn.Module, role: str, info: TPInfo) -> None:
    base = type(module)
    module.__class__ = swapped_class(base, ("tp_role", role), lambda: _role_namespace(base, role),
                                     name=f"TP{role.capitalize()}{base.__name__}")
    setattr(module, TP_ATTR, info)


_HIDDEN_KEYS = ("hidden_states", "x", "hidden_state", "input")


def _find_hidden(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    return next((t for key in _HIDDEN_KEYS if isinstance(t := kwargs.get(key), torch.Tensor)), None)


def _hidden_arg(args: tuple[Any, ...], kwargs: dict[str, Any], fn: Callable[[torch.Tensor], torch.Tensor],
                where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if args and isinstance(args[0], torch.Tensor):
        return (fn(args[0]), *args[1:]), kwargs
    for key in _HIDDEN_KEYS:
        if isinstance(kwargs.get(key), torch.Tensor):
            return args, {**kwargs, key: fn(kwargs[key])}
    raise RuntimeError(f"smp: tensor parallelism found no hidden-states tensor among the inputs of {where}")


def _first_output(output: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(output, tuple):
        return (fn(output[0]), *output[1:])
    return fn(output)


class _Sharder:
    """Replaces parameters with TP-sharded DTensors, reusing one replacement for tied parameters."""

    def __init__(self, mesh: DeviceMesh) -> None:
        self.mesh = mesh
        self.done: dict[int, nn.Parameter] = {}

    def shard(self, module: nn.Module, name: str, dim: int) -> None:
        p = module._parameters.get(name)
        if p is None:
            return
        new = self.done.get(id(p))
        if new is None:
            new = nn.Parameter(distribute_tensor(p.detach(), self.mesh, [Shard(dim)]), requires_grad=p.requires_grad)
            self.done[id(p)] = new
        module.register_parameter(name, new)


def _block_of(name: str, blocks: list[str]) -> str | None:
    return next((b for b in blocks if name.startswith(b + ".")), None)


def apply(model: nn.Module, styles: dict[str, Any], blocks: list[str], sequence_parallel: bool,
          mesh: DeviceMesh) -> bool:
    """Parallelize ``model`` in place after an inferred plan; returns whether sequence parallelism is on."""
    group, rank, size = mesh.get_group(), mesh.get_local_rank(), mesh.size()
    layout = SPLayout()  # one per model: the first block's split decides for every module
    sp_norms = [n for n, s in styles.items() if isinstance(s, SequenceParallel) and _block_of(n, blocks)]
    # Sequence parallelism needs every block's attention/MLP input to come out of a norm we gather.
    sp = sequence_parallel and bool(blocks) and "" not in blocks and len(sp_norms) >= len(blocks)
    sharder = _Sharder(mesh)
    copy_parents: set[str] = set()
    # An embedding whose rows do not divide stays replicated (below), and so does a head tied to it: sharding the
    # shared weight for the head alone would untie them.
    unsharded = {id(m.weight) for n, s in styles.items() if isinstance(s, RowwiseParallel)
                 and isinstance(m := model.get_submodule(n), nn.Embedding) and m.num_embeddings % size}
    for name, style in styles.items():
        mod = model.get_submodule(name)
        block = _block_of(name, blocks)
        if isinstance(style, ColwiseParallel) and isinstance(mod, nn.Linear):
            if id(mod.weight) in unsharded:
                continue
            sharder.shard(mod, "weight", 0)
            sharder.shard(mod, "bias", 0)
            if block is None and blocks:
                _set_role(mod, "head", TPInfo(group, rank, size, sp, layout=layout, mesh=mesh))
            else:
                parent = name.rpartition(".")[0]
                in_module = block is not None and parent != block
                if in_module and not sp:
                    copy_parents.add(parent)
                _set_role(mod, "col", TPInfo(group, rank, size, sp, copy_input=not in_module))
        elif isinstance(style, RowwiseParallel) and isinstance(mod, nn.Embedding):
            if mod.num_embeddings % size:
                continue  # stays replicated
            sharder.shard(mod, "weight", 0)
            _set_role(mod, "embed", TPInfo(group, rank, size, sp))
        elif isinstance(style, RowwiseParallel) and isinstance(mod, nn.Linear):
            sharder.shard(mod, "weight", 1)
            _set_role(mod, "row", TPInfo(group, rank, size, sp and block is not None, layout=layout))
        elif isinstance(style, SequenceParallel) and sp and block is not None:
            _set_role(mod, "sp_norm", TPInfo(group, rank, size, sp, layout=layout))
    for parent in sorted(copy_parents):
        info = TPInfo(group, rank, size, sp)
        mod = model.get_submodule(parent)
        mod.register_forward_pre_hook(
            functools.partial(_copy_input_hook, info, parent), with_kwargs=True)
    _install_block_hooks(model, blocks, group, layout if sp else None)
    if sp:
        info = TPInfo(group, rank, size, sp, layout=layout)
        # before the block's BlockTP hook: it reads the split just chosen (whether to sum partial gradients)
        model.get_submodule(blocks[0]).register_forward_pre_hook(
            functools.partial(_split_input_hook, info, blocks[0]), with_kwargs=True, prepend=True)
        model.get_submodule(blocks[-1]).register_forward_hook(functools.partial(_gather_output_hook, info))
    # A tied LM head (its weight is the embedding's): the head's role keeps the tie (same sharded parameter).
    return sp


def _copy_input_hook(info: TPInfo, where: str, module: nn.Module, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return _hidden_arg(args, kwargs, lambda t: CopyToTP.apply(t, info.group), where)


def _split_input_hook(info: TPInfo, where: str, module: nn.Module, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    def split(t: torch.Tensor) -> torch.Tensor:
        dim = info.layout.choose(t, info.size)
        return t if dim is None else SplitToSP.apply(t, dim, info.group)
    return _hidden_arg(args, kwargs, split, where)


def _gather_output_hook(info: TPInfo, module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
    def gather(t: torch.Tensor) -> torch.Tensor:
        dim = info.layout.gather_dim(t, info.size)
        return t if dim is None else GatherToReplicated.apply(t, dim, info.group)
    return _first_output(output, gather)


def _install_block_hooks(model: nn.Module, blocks: list[str], group: Any, layout: SPLayout | None) -> None:
    """One ``BlockTP`` per block holding TP modules; its hooks go first among the block's own (FSDP2, registered
    later with prepend=True, still unshards before and reshards after them)."""
    for i, block in enumerate(blocks):
        bmod = model.get_submodule(block)
        if not any(hasattr(m, TP_ATTR) for m in bmod.modules()):
            continue
        tp = BlockTP(group, layout, follow=i > 0)
        setattr(bmod, BLOCK_ATTR, tp)
        bmod.register_forward_pre_hook(tp.pre_forward, with_kwargs=True)
        bmod.register_forward_hook(tp.post_forward, with_kwargs=True, always_call=True)


_SHARDED_PARAMS = {"col": ("weight", "bias"), "head": ("weight", "bias"), "row": ("weight",), "embed": ("weight",)}


def is_tp_sharded(module: nn.Module, name: str) -> bool:
    """Whether ``module.name`` holds a different piece on each TP rank (else it is the same on all of them)."""
    return name in _SHARDED_PARAMS.get(getattr(type(module), "_smp_tp_role", ""), ())


def local_tp_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if hasattr(m, TP_ATTR)]


def to_local_parameters(model: nn.Module) -> None:
    """Replace the TP DTensor parameters of swapped modules by plain parameters holding the local shard (what FSDP1
    flattens: it handles plain tensors on any device, meta included, the same way with or without TP)."""
    done: dict[int, nn.Parameter] = {}
    for mod in local_tp_modules(model):
        for name, p in list(mod._parameters.items()):
            if isinstance(p, DTensor):
                new = done.get(id(p))
                if new is None:
                    new = nn.Parameter(p.to_local().detach(), requires_grad=p.requires_grad)
                    done[id(p)] = new
                mod._parameters[name] = new
