"""Keyword arguments of ``smp.tensor_parallelism(**kwargs)`` and the smp.nn modules they override.

SMP's rule: inside ``tensor_parallelism(**kwargs)``, an smp.nn module built there takes every keyword that
matches one of its ``__init__`` arguments. Both sides meet here: ``tensor_parallel`` opens and closes the
contexts (:func:`opened`) and checks their keywords (:func:`check_keywords`); ``nn.layers`` declares which
classes accept overrides (:func:`accepts_overrides`). Neither imports the other.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import Any

from .notices import warn_once

# tensor_parallelism() keywords that select fused CUDA kernels in SMP: the math is the same unfused.
KERNEL_ONLY = {"fused_softmax", "fused_bias_gelu"}
# Keywords the smp.nn modules honour (read through current_overrides()).
HONOURED = {"attention_in_fp32", "query_key_layer_scaling"}
_overrides: list[dict[str, Any]] = []  # kwargs of the open tensor_parallelism() contexts, outermost first
_INIT_NAMES: set[str] = set()  # every __init__ argument of the classes decorated with accepts_overrides


def current_overrides() -> dict[str, Any]:
    """Keyword overrides of the innermost tensor_parallelism() contexts (outer first, inner wins)."""
    merged: dict[str, Any] = {}
    for layer in _overrides:
        merged.update(layer)
    return merged


@contextlib.contextmanager
def opened(kwargs: dict[str, Any]) -> Iterator[None]:
    """``kwargs`` are in force (innermost) while the block runs."""
    _overrides.append(dict(kwargs))
    try:
        yield
    finally:
        _overrides.pop()


def accepts_overrides(cls: type[Any]) -> type[Any]:
    """Class decorator: tensor_parallelism(**kwargs) keywords that match an __init__ argument override it."""
    original = cls.__init__
    names = set(inspect.signature(original).parameters) - {"self"}

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        for key, value in current_overrides().items():
            if key in names:
                kwargs[key] = value
        original(self, *args, **kwargs)

    cls.__init__ = init
    cls._smp_init_names = names
    _INIT_NAMES.update(names)
    return cls


def init_argument_names() -> set[str]:
    """Every __init__ argument of the smp.nn modules (what tensor_parallelism(**kwargs) can override)."""
    return _INIT_NAMES


def check_keywords(kwargs: dict[str, Any], where: str) -> None:
    """Warn once per keyword that changes nothing here."""
    for key in kwargs:
        if key in KERNEL_ONLY:
            warn_once(f"tp-{key}", f"{where}({key}=...) selects a fused CUDA kernel in SMP; it has no effect here "
                      "(the same math runs unfused)")
        elif key not in HONOURED and key not in init_argument_names():
            warn_once(f"tp-{key}",
                      f"{where}({key}=...) matches no argument of the smp.nn modules; it has no effect here")
