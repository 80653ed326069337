"""``smp.DistributedModel``: places the model, applies tensor parallelism, runs pipeline-parallel steps."""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from .. import teardown
from ..process_group import current_device
from .pipeline import PipelineRuntime, build_pipeline
from .state import state
from .tensor_parallel import apply_tensor_parallelism, marked_names


class _CapturedCall(Exception):
    """Raised by the model while tracing which inputs a step body feeds it."""

    def __init__(self, args: tuple) -> None:
        self.args = args


class DistributedModel(nn.Module):
    """Wrap the user's model (SMP v1). Use it in place of the model for the rest of the script."""

    def __init__(self, module: nn.Module, trace_device: str = "gpu", overlapping_allreduce: bool = True,
                 backward_passes_per_step: int = 1, average_grads_across_microbatches: bool = True,
                 **_: Any) -> None:
        super().__init__()
        topo = state.topo()
        self.device = current_device()
        self.module = module.to(self.device)
        self.average_grads_across_microbatches = average_grads_across_microbatches
        self._tp_names = marked_names(module)
        self._pipeline: PipelineRuntime | None = None
        self._mode = "plain"  # "capture" | "loss" during pipeline steps
        self._mb_output: Any = None
        self._mb_loss: torch.Tensor | None = None
        if topo.pp == 1:
            state.param_remap.update(apply_tensor_parallelism(self.module, self._tp_names, topo.mesh["tp"]))
        state.model = self

    # --- plain use -------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._mode == "capture":
            raise _CapturedCall(args)
        if self._mode == "loss":
            return self._mb_output
        if state.topo().pp > 1:
            raise RuntimeError("smp: with pipeline_parallel_degree > 1 call the model inside an @smp.step function")
        return self.module(*args, **kwargs)

    def backward(self, loss: torch.Tensor) -> None:
        """Call inside @smp.step instead of loss.backward()."""
        if self._mode == "loss":
            self._mb_loss = loss  # the pipeline schedule runs backward
            return
        scale = 1.0 / state.cfg.microbatches if self.average_grads_across_microbatches else 1.0
        (loss * scale).backward()

    def local_modules(self) -> list[nn.Module]:
        return self._pipeline.modules if self._pipeline is not None else [self.module]

    def local_state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in self.local_modules():
            out.update(m.state_dict())
        return out

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Takes full tensors (smp.save partial=False) or this rank's shards (partial=True) alike."""
        for module in self.local_modules():
            own = module.state_dict()
            fixed = {}
            for key, value in state_dict.items():
                key = key[len("module."):] if key.startswith("module.") else key
                if key not in own:
                    continue
                target = own[key]
                if isinstance(target, DTensor) and not isinstance(value, DTensor):
                    value = value.to(target.device)
                    if tuple(value.shape) == tuple(target.shape):
                        value = distribute_tensor(value, target.device_mesh, target.placements)
                    else:
                        value = DTensor.from_local(value, target.device_mesh, target.placements,
                                                   shape=target.shape, stride=target.stride())
                fixed[key] = value
            # With pipeline stages each rank holds only its stage's keys.
            module.load_state_dict(fixed, strict=strict and self._pipeline is None, assign=assign)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.local_state_dict() if self._pipeline is not None else self.module.state_dict(*args, **kwargs)

    # --- steps -------------------------------------------------------------------------------
    def _run_step(self, body: Callable, mbs: list[tuple[tuple, dict]]) -> list[Any]:
        if state.topo().pp == 1:
            return [body(*a, **k) for a, k in mbs]
        return self._pipeline_step(body, mbs)

    def _capture_inputs(self, body: Callable, args: tuple, kwargs: dict) -> tuple:
        self._mode = "capture"
        try:
            body(*args, **kwargs)
        except _CapturedCall as call:
            return call.args
        finally:
            self._mode = "plain"
        raise RuntimeError("smp.step: the step function never called the model")

    def _pipeline_step(self, body: Callable, mbs: list[tuple[tuple, dict]]) -> list[Any]:
        topo = state.topo()
        inputs = [self._capture_inputs(body, a, k) for a, k in mbs]
        results: list[Any] = [None] * len(mbs)

        def loss_fn(output: torch.Tensor, mb_index: torch.Tensor) -> torch.Tensor:
            i = int(mb_index.reshape(-1)[0].item())
            self._mode, self._mb_output, self._mb_loss = "loss", output, None
            try:
                results[i] = body(*mbs[i][0], **mbs[i][1])
            finally:
                self._mode = "plain"
            if self._mb_loss is None:
                raise RuntimeError("smp.step: call model.backward(loss) inside the step function")
            return self._mb_loss

        if self._pipeline is None:
            self._pipeline = self._build_pipeline(inputs[0], loss_fn)
            # Its stages hold the pp process group, which must go before the interpreter finalizes.
            teardown.release_at_exit(self, _drop_pipeline)
        self._pipeline.schedule._loss_fn = loss_fn  # the step body (and its closure) changes per call
        full = tuple(torch.cat([mb[j] for mb in inputs]).to(self.device) for j in range(len(inputs[0])))
        mb_ids = torch.arange(len(mbs), device=self.device).reshape(len(mbs), 1)
        rt = self._pipeline
        args = full if rt.has_first else ()
        kwargs = {"target": mb_ids} if rt.has_last else {}
        rt.schedule.step(*args, **kwargs)
        # Every pipeline rank gets the step's outputs, as in SMP v1.
        last = topo.pp - 1
        holder = [results if rt.has_last else None]
        group = topo.group("pp")
        src = dist.get_global_rank(group, last)
        if rt.has_last:
            holder = [[_to_cpu(r) for r in results]]
        dist.broadcast_object_list(holder, src=src, group=group)
        return holder[0]

    def _build_pipeline(self, example: tuple, loss_fn: Callable) -> PipelineRuntime:
        topo = state.topo()

        def prepare(stage_module: nn.Module) -> None:
            # Tracing turned the stage's submodules into graph modules over the same parameters; put the
            # original Linear objects back so that DTensor's parallel styles apply to them.
            for name in self._tp_names:
                try:
                    stage_module.get_submodule(name)
                except AttributeError:
                    continue
                parent, _, leaf = name.rpartition(".")
                setattr(stage_module.get_submodule(parent) if parent else stage_module, leaf,
                        self.module.get_submodule(name))
            state.param_remap.update(apply_tensor_parallelism(stage_module, self._tp_names, topo.mesh["tp"]))

        return build_pipeline(self.module, tuple(t.to(self.device) for t in example), topo.pp_rank, topo.pp,
                              state.cfg.microbatches, state.cfg.pipeline, self.device, topo.group("pp"),
                              loss_fn, prepare)

    def parameters(self, recurse: bool = True):  # type: ignore[override]
        if self._pipeline is None:
            yield from self.module.parameters(recurse)
            return
        for m in self._pipeline.modules:
            yield from m.parameters(recurse)


def _drop_pipeline(model: DistributedModel) -> None:
    model._pipeline = None


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cpu(v) for v in value)
    return value
