"""``@smp.step`` and ``StepOutput``: run a training step's body once per microbatch."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

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
        if isinstance(value, torch.Tensor) and name not in non_split:
            axis = axes.get(name, 0)
            if value.shape[axis] % n:
                raise ValueError(f"smp.step: argument {name!r} has size {value.shape[axis]} along axis {axis}, "
                                 f"not divisible by microbatches={n}; use drop_last=True or change microbatches")
            pieces[name] = torch.tensor_split(value, n, dim=axis)
    result = []
    for i in range(n):
        arguments = {k: (pieces[k][i] if k in pieces else v) for k, v in bound.arguments.items()}
        b = inspect.BoundArguments(bound.signature, arguments)  # type: ignore[arg-type]
        result.append((b.args, b.kwargs))
    return result


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
