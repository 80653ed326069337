"""``@smp.step`` and ``StepOutput``: run a training step's body once per microbatch."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .state import state


class StepOutput:
    """One value of a step's return, per microbatch."""

    def __init__(self, outputs: Sequence[Any]) -> None:
        self.outputs = list(outputs)

    def _stacked(self) -> torch.Tensor:
        return torch.stack([torch.as_tensor(o) for o in self.outputs])

    def reduce_mean(self) -> torch.Tensor:
        return self._stacked().float().mean(0)

    def reduce_sum(self) -> torch.Tensor:
        return self._stacked().sum(0)

    def concat(self) -> torch.Tensor:
        return torch.cat([o if o.dim() else o.reshape(1) for o in self.outputs])

    def stack(self) -> torch.Tensor:
        return self._stacked()

    def merge(self) -> Any:
        raise NotImplementedError("StepOutput.merge() is TensorFlow-only in SMP; use StepOutput.concat() in PyTorch")

    def accumulate(self, method: str = "variable", var: Any = None) -> Any:
        raise NotImplementedError("StepOutput.accumulate() is TensorFlow-only in SMP; use StepOutput.reduce_mean() "
                                  "in PyTorch")

    def __len__(self) -> int:
        return len(self.outputs)

    def __repr__(self) -> str:
        return f"StepOutput({len(self.outputs)} microbatches)"


def split_arguments(func: Callable, args: tuple, kwargs: dict, n: int, non_split: Sequence[str],
                    axes: dict[str, int]) -> list[tuple[tuple, dict]]:
    """Per microbatch (args, kwargs): tensors are split along their axis (0 unless told), the rest repeated."""
    bound = inspect.signature(func).bind(*args, **kwargs)
    pieces: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if name not in non_split and _splittable(value):
            pieces[name] = [_slice(value, n, i, axes.get(name, 0), name) for i in range(n)]
    result = []
    for i in range(n):
        arguments = {k: (pieces[k][i] if k in pieces else v) for k, v in bound.arguments.items()}
        b = inspect.BoundArguments(bound.signature, arguments)
        result.append((b.args, b.kwargs))
    return result


def _splittable(value: Any) -> bool:
    if isinstance(value, torch.Tensor) or hasattr(value, "smp_slice"):
        return True
    if isinstance(value, dict):
        return any(_splittable(v) for v in value.values())
    if isinstance(value, (list, tuple, set)):
        return any(_splittable(v) for v in value)
    return False


def _slice(value: Any, n: int, i: int, axis: int, name: str) -> Any:
    """Microbatch ``i`` of ``n`` of an argument: tensors split along ``axis``, containers element-wise, objects with
    an ``smp_slice(num_mb, mb, axis)`` method slice themselves (SMP's protocol), anything else repeated."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return value
        if value.shape[axis] % n:
            raise ValueError(f"smp.step: argument {name!r} has size {value.shape[axis]} along axis {axis}, "
                             f"not divisible by microbatches={n}; use drop_last=True or change microbatches")
        return torch.tensor_split(value, n, dim=axis)[i]
    if hasattr(value, "smp_slice"):
        return value.smp_slice(n, i, axis)
    if isinstance(value, dict):
        return type(value)((k, _slice(v, n, i, axis, f"{name}[{k!r}]")) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        items = [_slice(v, n, i, axis, f"{name}[{j}]") for j, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, set):
        return {_slice(v, n, i, axis, name) for v in value}
    return value


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    return value


def _pack(results: list[Any]) -> Any:
    """Per-microbatch return values -> StepOutput (or a tuple of them)."""
    first = results[0]
    if isinstance(first, tuple):
        return tuple(StepOutput([r[i] for r in results]) for i in range(len(first)))
    return StepOutput(results)


def step(func: Callable | None = None, *, non_split_inputs: Sequence[str] | None = None,
         input_split_axes: dict[str, int] | None = None, detach_outputs: bool = True) -> Callable:
    """Decorator: the body runs once per microbatch (``microbatches`` parameter); returns StepOutput(s)."""
    def decorate(body: Callable) -> Callable:
        @functools.wraps(body)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            model = state.model
            if model is None:
                raise RuntimeError("smp.step: wrap your model in smp.DistributedModel before calling a step")
            n = state.cfg.microbatches
            mbs = split_arguments(body, args, kwargs, n, non_split_inputs or (), input_split_axes or {})
            results = model._run_step(body, mbs)
            if detach_outputs:
                results = [_detach(r) for r in results]
            return _pack(results)
        return wrapper
    return decorate(func) if func is not None else decorate
