"""``smp.DistributedOptimizer``: data-parallel gradient averaging, then the wrapped optimizer's step."""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.optim import Optimizer

from .notices import warn_once
from .state import state


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def _all_reduce_mean(grads: list[torch.Tensor], group: Any, divisor: int) -> None:
    """One flat all-reduce per dtype (few large messages beat many small ones)."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for g in grads:
        by_dtype.setdefault(g.dtype, []).append(g)
    for same in by_dtype.values():
        flat = torch.cat([g.reshape(-1) for g in same])
        dist.all_reduce(flat, group=group)
        flat.div_(divisor)
        offset = 0
        for g in same:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


def synchronize_gradients(params: list[torch.Tensor]) -> None:
    """Average gradients so that every replica holds the gradient of the mean loss over the dp batch.

    Replicated parameters average over dp (all ranks of the same stage). Tensor-parallel parameters
    already hold the sum over their TP group's batches (DTensor backward), so they sum over rdp and
    divide by dp.
    """
    topo = state.topo()
    replicated = [p.grad for p in params if p.grad is not None and not isinstance(p, DTensor)]
    sharded = [_local(p.grad) for p in params if p.grad is not None and isinstance(p, DTensor)]
    if replicated and topo.dp > 1 and (state.cfg.ddp or topo.tp > 1):
        _all_reduce_mean(replicated, topo.group(topo.dp_dims), topo.dp)
    if sharded:
        if topo.rdp > 1 and state.cfg.ddp:
            _all_reduce_mean(sharded, topo.group("rdp"), topo.dp)
        else:
            for g in sharded:
                g.div_(topo.tp)


class DistributedOptimizer:
    """Wraps a torch optimizer built over ``DistributedModel.parameters()``."""

    def __init__(self, optimizer: Optimizer, static_loss_scale: float | None = 1.0, dynamic_loss_scale: bool = False,
                 **dynamic_loss_args: Any) -> None:
        if static_loss_scale not in (1.0, None) or dynamic_loss_scale or dynamic_loss_args:
            warn_once("opt-loss-scale", "DistributedOptimizer(static_loss_scale/dynamic_loss_scale/dynamic_loss_args) "
                      "configure SMP's fp16 optimizer; they have no effect here (no loss scaling is applied): "
                      "use smp.amp.GradScaler for loss scaling")
        self.optimizer = optimizer
        state.optimizer = self

    def _remap_params(self) -> None:
        """Parameters replaced by pipeline partitioning / TP after the optimizer was built."""
        if not state.param_remap:
            return
        for group in self.optimizer.param_groups:
            group["params"] = [state.param_remap.get(id(p), p) for p in group["params"]]

    def step(self, closure: Any = None) -> Any:
        self._remap_params()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        synchronize_gradients(params)
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._remap_params()
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def local_state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Takes a state saved from this layout (smp.save stores tensor-parallel state as local shards)."""
        self._remap_params()
        sd = {k: v for k, v in sd.items() if k != "_smp_is_partial"}
        self.optimizer.load_state_dict(sd)
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if not isinstance(p, DTensor) or p not in self.optimizer.state:
                    continue
                local = p.to_local()
                per_param = self.optimizer.state[p]
                for key, value in per_param.items():
                    if (isinstance(value, torch.Tensor) and not isinstance(value, DTensor)
                            and value.shape == local.shape):
                        per_param[key] = DTensor.from_local(value.to(local.device), p.device_mesh, p.placements,
                                                            shape=p.shape, stride=p.stride())

    # --- SMP's parameter bookkeeping (AWS's fp16 helpers and state.param_name_to_index_tp_group use it) ---------
    def _param_id_to_index(self) -> dict[int, int]:
        """id(parameter) -> its index in ``state_dict()["state"]``, numbered as torch's Optimizer.state_dict does
        (positions across the param groups in order)."""
        self._remap_params()
        out: dict[int, int] = {}
        start = 0
        for group in self.optimizer.param_groups:
            for i, p in enumerate(group["params"], start):
                out.setdefault(id(p), i)
            start += len(group["params"])
        return out

    def param_name_to_index(self) -> dict[str, int]:
        """Name (as ``model.local_named_parameters()`` gives it) -> optimizer state index, for this rank's
        parameters that the optimizer holds."""
        ids = self._param_id_to_index()
        return {name: ids[id(p)] for name, p in self._local_named_parameters() if id(p) in ids}

    def _param_index_to_param_local(self) -> dict[int, torch.Tensor]:
        ids = self._param_id_to_index()
        return {ids[id(p)]: p for _, p in self._local_named_parameters() if id(p) in ids}

    @staticmethod
    def _local_named_parameters() -> list[tuple[str, torch.Tensor]]:
        if state.model is None:
            raise RuntimeError("smp: parameter names come from the smp.DistributedModel; create it first")
        return list(state.model.local_named_parameters())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)
