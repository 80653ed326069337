"""SMP v1 tensor parallelism on DTensor, with SMP v1's data layout.

In SMP v1 the ranks of a tensor-parallel group read *different* batches. A distributed nn.Linear
all-gathers its input over the batch dimension, computes its column shard, and hands each rank back
the rows of its own batch (all-to-all). nn.Embedding is split the same way over the embedding dim.
Each marked module is distributed on its own, so any model graph stays correct. As SMP documents, a
module that shares a parameter with another one stays replicated; unlike SMP, a size the degree does not
divide is still split (DTensor shards unevenly).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, cast

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from torch.nn.modules.module import register_module_parameter_registration_hook

from .state import state
from .tp_keywords import check_keywords, current_overrides, opened

SUPPORTED = (nn.Linear, nn.Embedding)

_enabled_stack: list[bool] = []  # enabled= flags of the open tensor_parallelism() contexts, outermost first


@contextlib.contextmanager
def tensor_parallelism(enabled: bool = True, **kwargs: Any) -> Iterator[None]:
    """Supported modules (nn.Linear, nn.Embedding, registered classes) created inside are distributed by
    DistributedModel; smp.nn modules created inside take ``kwargs`` that match their arguments."""
    check_keywords(kwargs, "tensor_parallelism")

    def mark(module: nn.Module, name: str, param: Any) -> None:
        if isinstance(module, SUPPORTED):
            if enabled:
                state.tp_marks[id(module)] = dict(kwargs)
            else:
                state.tp_marks.pop(id(module), None)

    handle = register_module_parameter_registration_hook(mark)
    _enabled_stack.append(enabled)
    try:
        with opened(kwargs):
            yield
    finally:
        _enabled_stack.pop()
        handle.remove()


def context_enabled() -> bool | None:
    """Innermost tensor_parallelism() state, or None outside any context."""
    return _enabled_stack[-1] if _enabled_stack else None


def set_tensor_parallelism(module: nn.Module, enabled: bool = True, **kwargs: Any) -> None:
    """Mark ``module`` and its supported submodules (call before DistributedModel)."""
    check_keywords(kwargs, "set_tensor_parallelism")
    for sub in module.modules():
        if isinstance(sub, SUPPORTED) or type(sub) in _registry:
            if enabled:
                state.tp_marks[id(sub)] = dict(kwargs)
            else:
                state.tp_marks.pop(id(sub), None)


# ---- tp_register: a user class -> an smp.nn distributed module ---------------------------------------------
_registry: dict[type, tuple[type, Callable | None, Callable | None, Callable | None]] = {}


def tp_register_with_module(module_cls: type, dist_module: type, init_hook: Callable | None = None,
                            forward_hook: Callable | None = None, return_hook: Callable | None = None) -> None:
    """Instances of ``module_cls`` marked for tensor parallelism are replaced by ``dist_module`` in DistributedModel."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, nn.Module)):
        raise TypeError(f"tp_register_with_module: module_cls must be an nn.Module class, got {module_cls!r}")
    _registry[module_cls] = (dist_module, init_hook, forward_hook, return_hook)
    original_init = module_cls.__init__
    if getattr(original_init, "_smp_records_args", False):
        return

    def recording_init(self: nn.Module, *args: Any, **kw: Any) -> None:
        original_init(self, *args, **kw)
        cast(Any, self)._smp_init_args = (args, kw)  # what the replacement is built from
        enabled = context_enabled()
        if enabled:
            state.tp_marks[id(self)] = dict(current_overrides())

    recording_init._smp_records_args = True  # type: ignore[attr-defined]
    module_cls.__init__ = recording_init  # type: ignore[method-assign]


def tp_register(dist_module: type, init_hook: Callable | None = None, forward_hook: Callable | None = None,
                return_hook: Callable | None = None) -> Callable[[type], type]:
    """Class decorator form of tp_register_with_module."""
    def decorate(cls: type) -> type:
        tp_register_with_module(cls, dist_module, init_hook, forward_hook, return_hook)
        return cls
    return decorate


class _Replacement(nn.Module):
    """A registered module's distributed counterpart, behind the original forward/return interface."""

    def __init__(self, inner: nn.Module, forward_hook: Callable | None, return_hook: Callable | None) -> None:
        super().__init__()
        self.module = inner
        self._forward_hook = forward_hook
        self._return_hook = return_hook

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._forward_hook is not None:
            args, kwargs = self._forward_hook(*args, **kwargs)
        out = self.module(*args, **kwargs)
        return self._return_hook(out) if self._return_hook is not None else out


def replace_registered(root: nn.Module) -> None:
    """Swap marked instances of registered classes for their distributed modules (in place, outermost first)."""
    for name, mod in list(root.named_modules()):
        if not name or type(mod) not in _registry or id(mod) not in state.tp_marks:
            continue
        try:
            root.get_submodule(name)
        except AttributeError:  # inside a module replaced already
            continue
        dist_cls, init_hook, forward_hook, return_hook = _registry[type(mod)]
        args, kwargs = getattr(mod, "_smp_init_args", ((), {}))
        if init_hook is not None:
            args, kwargs = init_hook(*args, **kwargs)
        kwargs = {**kwargs, **{k: v for k, v in state.tp_marks[id(mod)].items() if k in _init_names(dist_cls)}}
        new = _Replacement(dist_cls(*args, **kwargs), forward_hook, return_hook)
        parent, _, leaf = name.rpartition(".")
        setattr(root.get_submodule(parent) if parent else root, leaf, new)


def _init_names(cls: type[Any]) -> set[str]:
    import inspect

    return set(inspect.signature(cls.__init__).parameters) - {"self"}


# ---- applying the marks ---------------------------------------------------------------------------------------
def marked_names(root: nn.Module) -> list[str]:
    return [name for name, mod in root.named_modules() if id(mod) in state.tp_marks and isinstance(mod, SUPPORTED)]


def _shared_parameter_owners(root: nn.Module) -> set[str]:
    """Names of modules holding a parameter that another module also holds (tied weights)."""
    owners: dict[int, set[str]] = {}
    for mod_name, mod in root.named_modules(remove_duplicate=False):
        for p in mod.parameters(recurse=False):
            owners.setdefault(id(p), set()).add(mod_name)
    return {name for names in owners.values() if len(names) > 1 for name in names}


def _splittable(mod: nn.Module, degree: int) -> bool:
    # DTensor splits uneven sizes too (the last ranks get smaller shards), so only sparse embeddings are left out.
    return isinstance(mod, nn.Linear) or (isinstance(mod, nn.Embedding) and not mod.sparse)


def distributable(root: nn.Module, names: list[str], degree: int) -> list[str]:
    shared = _shared_parameter_owners(root)
    out = []
    for n in names:
        try:
            mod = root.get_submodule(n)
        except AttributeError:
            continue
        if n in shared or getattr(mod, "_smp_tied", False) or not _splittable(mod, degree):
            continue
        out.append(n)
    return out


def apply_tensor_parallelism(root: nn.Module, names: list[str], tp_mesh: DeviceMesh) -> dict[int, nn.Parameter]:
    """Distribute the named modules of ``root``; returns id(old param) -> new DTensor param."""
    if tp_mesh.size() == 1:
        return {}
    present = distributable(root, names, tp_mesh.size())
    if not present:
        return {}
    before = {n: p for n, p in root.named_parameters()}
    style = ColwiseParallel(input_layouts=Shard(0), output_layouts=Shard(0))
    parallelize_module(root, tp_mesh, {n: style for n in present})
    after = dict(root.named_parameters())
    return {id(before[n]): after[n] for n in before if n in after and after[n] is not before[n]}
