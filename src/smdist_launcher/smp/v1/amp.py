"""``smp.amp.GradScaler``: torch's GradScaler contract for DistributedModel / DistributedOptimizer.

Works on CPU and CUDA, with tensor-parallel (DTensor) and pipeline-stage parameters: each rank checks its own
gradients for inf/NaN and the verdict is all-reduced over the world, so every rank skips (or takes) the same step
and the scale stays identical everywhere.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def _inner(optimizer: Any) -> Any:
    return getattr(optimizer, "optimizer", optimizer)


class GradScaler:
    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True, device: str | None = None) -> None:
        if growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0:
            raise ValueError("smp.amp.GradScaler: growth_factor must be > 1 and backoff_factor in (0, 1)")
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._found_inf: dict[int, bool] = {}  # id(optimizer) -> verdict of this iteration's unscale_

    # --- torch.amp.GradScaler's API ---------------------------------------------------------------
    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        if not self._enabled:
            return outputs
        if isinstance(outputs, torch.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"smp.amp.GradScaler.scale: expected tensors, got {type(outputs).__name__}")

    def unscale_(self, optimizer: Any) -> None:
        if not self._enabled:
            return
        key = id(optimizer)
        if key in self._found_inf:
            raise RuntimeError("smp.amp.GradScaler.unscale_() was already called on this optimizer "
                               "since the last update()")
        if hasattr(optimizer, "_remap_params"):
            optimizer._remap_params()
        inv = 1.0 / self._scale
        bad = torch.zeros(1)
        with torch.no_grad():
            for group in _inner(optimizer).param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = _local(p.grad)
                    g.mul_(inv)
                    if not torch.isfinite(g).all():
                        bad.fill_(1.0)
        if dist.is_initialized():
            # gloo/NCCL both reduce a CPU or current-device tensor; MAX makes one bad rank skip everyone's step.
            device = torch.device("cuda", torch.cuda.current_device()) if (
                torch.cuda.is_available() and dist.get_backend() != "gloo") else torch.device("cpu")
            bad = bad.to(device)
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        self._found_inf[key] = bool(bad.item() > 0)

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._found_inf:
            self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return None  # skipped: inf/NaN in some rank's gradients
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._found_inf.clear()

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, value: float) -> None:
        self._growth_factor = float(value)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, value: float) -> None:
        self._backoff_factor = float(value)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, value: int) -> None:
        self._growth_interval = int(value)

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if not sd:
            raise RuntimeError("smp.amp.GradScaler.load_state_dict: the state dict is empty (saved while disabled)")
        self._scale = float(sd["scale"])
        self._growth_factor = float(sd["growth_factor"])
        self._backoff_factor = float(sd["backoff_factor"])
        self._growth_interval = int(sd["growth_interval"])
        self._growth_tracker = int(sd["_growth_tracker"])


__all__ = ["GradScaler"]
