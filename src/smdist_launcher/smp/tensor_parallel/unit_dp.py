"""Tensor parallelism over every rank (a data-parallel mesh of one rank): mixed precision without FSDP.

With ``tensor_parallel_degree`` equal to the world size there is nothing to shard over data parallelism:
FSDP2 on a one-rank mesh communicates nothing, yet its hooks (unshard, reshard, post-backward, copy-in/out)
and the DTensor round trip of every parameter (``to_local`` in forward, ``from_local`` of every gradient in
backward) ran on the host each block, and the TP step is bound by its host. ``install`` gives
``tsm.shard_model`` the same result without them: the parameters stay the TP DTensors (the optimizer, DCP
checkpoints and ``clip_grad_norm_`` see them as under FSDP2); each block's forward pre-hook puts a cast
(``param_dtype``) of each parameter's local tensor where its module reads it, so autograd accumulates the
gradient in the parameter's own dtype on the local tensor, which a post-accumulate hook moves to the
parameter's DTensor ``.grad`` (wrapped, or added to the one there: ``zero_grad`` may come between a forward and
its backward, as FSDP2 allows). Each module casts its floating inputs (``cast_forward_inputs``) as every FSDP2
unit does; the root alone casts its output (``output_dtype``). The model's class gains FSDP2's gradient-sync
switches as no-ops (scripts call them for accumulation): micro-batches accumulate in the parameters' dtype,
where FSDP2 without a ``reduce_dtype`` accumulates unsynced ones in ``param_dtype``.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.utils import _apply_to_tensors

from . import lean_saves, local_modules
from .class_swap import swapped_class
from .local_modules import _restore, _swap_tensor

ATTR = "_smp_unit_dp"
# on a local tensor: (its parameter, weakly: where its gradient goes; id of the tensor that has the hook), the id
# telling a deep copy (which copies the attribute, not the hook) from the tensor itself
_EXPOSES = "_smp_unit_dp_param"


def _wrap_grad(grad: torch.Tensor, param: DTensor) -> DTensor:
    spec = param._spec
    if grad.stride() == tuple(param._local_tensor.stride()):
        return DTensor(grad, spec, requires_grad=False)  # ~2 us, no checks
    return DTensor.from_local(grad, spec.mesh, spec.placements, run_check=False, shape=param.shape,
                              stride=param.stride())


def _expose(t: torch.Tensor) -> None:
    """The local tensor's post-accumulate hook: its gradient moved to the parameter's DTensor ``.grad`` (wrapped,
    or added to the one there). Not left on the local tensor: a ``zero_grad`` between a forward and its backward
    drops only the parameter's ``.grad``, and autograd would add the new gradient to the stale one. The parameter
    is held weakly, on the local tensor: the hook lives in its C++ autograd meta, where a strong reference to the
    parameter (which holds the local tensor) is a cycle Python's collector cannot see (every model leaked)."""
    g = t.grad
    if g is None:
        return
    t.grad = None
    mark: tuple[weakref.ref[DTensor], int] | None = getattr(t, _EXPOSES, None)
    param = None if mark is None else mark[0]()
    if param is None:
        return
    have = param.grad
    if have is None:
        param.grad = _wrap_grad(g, param)
    else:  # accumulation (micro-batches, or zero_grad(set_to_none=False)): as autograd's in-place sum
        (have._local_tensor if isinstance(have, DTensor) else have).add_(g)


class UnitDPPrecision:
    """The casts and gradient plumbing of one model (see the module docstring)."""

    def __init__(self, policy: MixedPrecisionPolicy) -> None:
        self.param_dtype = policy.param_dtype

    @staticmethod
    def _leaf(p: torch.Tensor) -> torch.Tensor:
        if not isinstance(p, DTensor):
            return p
        local = p._local_tensor
        if local.requires_grad != p.requires_grad:  # first use, or (un)frozen since the last forward
            local.requires_grad_(p.requires_grad)
        if p.requires_grad:
            mark: tuple[weakref.ref[DTensor], int] | None = getattr(local, _EXPOSES, None)
            if mark is None or mark[1] != id(local):
                # first use, a new local tensor (materialize, load), a deep copy: one hook per tensor
                local.register_post_accumulate_grad_hook(_expose)
                mark = None
            if mark is None or mark[0]() is not p:
                setattr(local, _EXPOSES, (weakref.ref(p), id(local)))
        return local

    def cast(self, p: torch.Tensor) -> torch.Tensor:
        t = self._leaf(p)
        dtype = self.param_dtype
        if dtype is not None and t.is_floating_point() and t.dtype != dtype:
            copy = t.to(dtype)
            if local_modules.OPTIONS.recast_weights:
                lean_saves.mark_cast(copy, t)
            return copy
        return t if t is p else t.view_as(t)  # a fresh tensor: the swapped-in one must not be the leaf itself


class _Scope:
    """Swaps casts in for the parameters of ``owned`` (module, name) pairs around one module's forward."""

    def __init__(self, precision: UnitDPPrecision, owned: list[tuple[nn.Module, str]], policy: MixedPrecisionPolicy,
                 root: bool = False) -> None:
        """Every module casts its inputs (FSDP2's ``cast_forward_inputs`` on each unit: a root may compute in
        float32 between blocks, e.g. adding a float32 buffer); the ``root`` casts its output (``output_dtype``)."""
        self.precision, self.owned = precision, owned
        self.input_dtype = policy.param_dtype if policy.cast_forward_inputs else None
        self.output_dtype = policy.output_dtype if root else None
        self.saved: list[list[tuple[nn.Module, str, tuple[str, Any]]]] = []

    def pre(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        swaps = []
        casts: dict[int, torch.Tensor] = {}  # one cast per parameter: a tied one's gradients summed as FSDP2's
        for m, n in self.owned:
            p = m._parameters.get(n)
            if p is not None:
                c = casts.get(id(p))
                if c is None:
                    c = casts[id(p)] = self.precision.cast(p)
                swaps.append((m, n, _swap_tensor(m, n, c)))
        self.saved.append(swaps)
        if self.input_dtype is not None:  # FSDP2's cast_forward_inputs
            return _cast_floats(args, self.input_dtype), _cast_floats(kwargs, self.input_dtype)
        return None

    def post(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
        if self.saved:
            for m, n, old in reversed(self.saved.pop()):
                _restore(m, n, old)
        if self.output_dtype is not None:  # FSDP2's output_dtype
            return _cast_floats(output, self.output_dtype)
        return None


def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    """Floating tensors cast, in any container FSDP2's casts walk (its own ``_apply_to_tensors``)."""
    def one(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype) if x.is_floating_point() and x.dtype != dtype else x
    return _apply_to_tensors(one, value)


class UnitDPModule:
    """FSDP2's switches a training script calls, as no-ops (one rank: nothing to sync or reshard)."""

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse: bool = True) -> None:
        return None

    def set_is_last_backward(self, is_last_backward: bool) -> None:
        return None

    def set_reshard_after_backward(self, reshard_after_backward: bool, *, recurse: bool = True) -> None:
        return None

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        return None

    def reshard(self) -> None:
        return None

    def unshard(self, async_op: bool = False) -> None:
        return None


def _owned(module: nn.Module, skip: Iterable[nn.Module]) -> list[tuple[nn.Module, str]]:
    """(module, name) of every parameter under ``module`` outside the ``skip`` subtrees."""
    skipped = {id(s) for s in skip}
    out: list[tuple[nn.Module, str]] = []

    def walk(m: nn.Module) -> None:
        if id(m) in skipped:
            return
        out.extend((m, n) for n, p in m._parameters.items() if p is not None)
        for child in m.children():
            walk(child)
    walk(module)
    return out


def _replicate_plain(model: nn.Module, mesh: DeviceMesh) -> None:
    """The parameters TP left whole become Replicate DTensors on the TP mesh, as FSDP2 makes every parameter a
    DTensor: an optimizer's foreach ops refuse a mix of DTensors and plain tensors. Ties are kept."""
    done: dict[int, nn.Parameter] = {}
    for mod in model.modules():
        for name, p in list(mod._parameters.items()):
            if p is None or isinstance(p, DTensor):
                continue
            new = done.get(id(p))
            if new is None:
                new = done[id(p)] = nn.Parameter(DTensor.from_local(p.detach(), mesh, [Replicate()], run_check=False),
                                                  requires_grad=p.requires_grad)
            mod._parameters[name] = new


def install(model: nn.Module, blocks: list[str], policy: MixedPrecisionPolicy, mesh: DeviceMesh) -> nn.Module:
    """Per-block casts (so an activation-checkpoint recompute casts again) and one scope for the rest."""
    _replicate_plain(model, mesh)
    precision = UnitDPPrecision(policy)
    mods = [model.get_submodule(b) for b in blocks]
    for block in mods:
        scope = _Scope(precision, _owned(block, ()), policy)
        # first among the block's pre-hooks (before BlockTP's: it then sees plain local tensors), restored last
        block.register_forward_pre_hook(scope.pre, with_kwargs=True, prepend=True)
        block.register_forward_hook(scope.post, with_kwargs=True, always_call=True)
    root = _Scope(precision, _owned(model, mods), policy, root=True)
    model.register_forward_pre_hook(root.pre, with_kwargs=True, prepend=True)
    model.register_forward_hook(root.post, with_kwargs=True, always_call=True)
    # the model's own name: HF's save_pretrained writes it into config.architectures (it strips only FSDP2's
    # "FSDP" prefix), and a loader must find the class by that name
    model.__class__ = swapped_class(type(model), "unit_dp", dict, mixins=(UnitDPModule,))
    setattr(model, ATTR, precision)
    return model
