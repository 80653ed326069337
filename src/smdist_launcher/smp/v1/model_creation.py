"""``smp.delay_param_initialization`` and ``smp.model_creation``: how the model is built before DistributedModel.

Delayed initialization builds parameters on the meta device (no memory); DistributedModel then allocates them on
this rank's device and runs each module's ``reset_parameters()`` (..delayed_param.materialize), as SMP initializes
after partitioning. The initial values therefore come from the modules' own initializers, not the creation-time RNG.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .tensor_parallel import tensor_parallelism


@contextlib.contextmanager
def delay_param_initialization(enabled: bool = True) -> Iterator[None]:
    if not enabled:
        yield
        return
    with torch.device("meta"):
        yield


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    if dtype is None:
        yield
        return
    if not dtype.is_floating_point:
        raise ValueError(f"smp.model_creation: dtype must be a floating-point torch.dtype, got {dtype}")
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def model_creation(tensor_parallelism: bool = False, dtype: torch.dtype | None = None,
                   delayed_param_initialization: bool = False, **tensor_parallel_config: Any) -> Iterator[None]:
    """Build the model with tensor parallelism marks, a creation dtype and (optionally) delayed initialization."""
    with contextlib.ExitStack() as stack:
        if tensor_parallelism:
            stack.enter_context(_tp_context(True, **tensor_parallel_config))
        stack.enter_context(_default_dtype(dtype))
        if delayed_param_initialization:
            stack.enter_context(delay_param_initialization(True))
        yield


_tp_context = tensor_parallelism  # the argument named tensor_parallelism hides the context manager above
