"""``smp.DistributedModel``: places the model, applies tensor parallelism, runs pipeline-parallel steps."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from .. import teardown
from ..delayed_param import materialize
from ..process_group import current_device
from .notices import warn_once
from .partition import manual_split_points
from .pipeline import PipelineRuntime, build_pipeline
from .state import state
from .tensor_parallel import apply_tensor_parallelism, marked_names, replace_registered


class _CapturedCall(Exception):
    """Raised by the model while tracing which inputs a step body feeds it."""

    def __init__(self, args: tuple) -> None:
        self.args = args


class DistributedModel(nn.Module):
    """Wrap the user's model (SMP v1). Use it in place of the model for the rest of the script."""

    def __init__(self, module: nn.Module, trace_device: str = "gpu", trace_execution_times: bool = False,
                 overlapping_allreduce: bool = True, backward_passes_per_step: int = 1,
                 average_grads_across_microbatches: bool = True, bucket_cap_mb: int = 25,
                 trace_memory_usage: bool = False, broadcast_buffers: bool = True,
                 gradient_as_bucket_view: bool = False, **unknown: Any) -> None:
        super().__init__()
        _warn_unused_arguments(trace_execution_times=trace_execution_times, overlapping_allreduce=overlapping_allreduce,
                               backward_passes_per_step=backward_passes_per_step, bucket_cap_mb=bucket_cap_mb,
                               trace_memory_usage=trace_memory_usage, gradient_as_bucket_view=gradient_as_bucket_view,
                               **unknown)
        if trace_device not in ("gpu", "cpu"):
            raise ValueError(f"smp.DistributedModel: trace_device={trace_device!r}; use 'gpu' or 'cpu'")
        topo = state.topo()
        self.device = current_device()
        replace_registered(module)
        if any(p.is_meta for p in module.parameters()) or any(b.is_meta for b in module.buffers()):
            materialize(module, self.device)  # smp.delay_param_initialization: initialize now, on the device
        self.module = module.to(self.device)
        self.average_grads_across_microbatches = average_grads_across_microbatches
        self.broadcast_buffers = broadcast_buffers
        self._tp_names = marked_names(module)
        self._pipeline: PipelineRuntime | None = None
        self._mode = "plain"  # "capture" | "loss" during pipeline steps
        self._mb_output: Any = None
        self._mb_loss: torch.Tensor | None = None
        self._post_partition_hooks: dict[int, Callable] = {}
        self.partitioned = False
        if topo.pp == 1:
            state.param_remap.update(apply_tensor_parallelism(self.module, self._tp_names, topo.mesh["tp"]))
            self._after_partition()
        state.model = self

    def _after_partition(self) -> None:
        """Start every replica from the first one's weights (SMP broadcasts at partition time), run the hooks,
        then apply a checkpoint resume_from_checkpoint read earlier."""
        self.partitioned = True
        broadcast_from_first_replica(list(self.local_parameters()) + list(self.local_buffers()))
        for hook in list(self._post_partition_hooks.values()):
            hook(self, state.optimizer)
        if state.pending_resume is not None:
            from .checkpoint_files import apply_pending_resume

            apply_pending_resume()

    def register_post_partition_hook(self, hook: Callable) -> Any:
        """``hook(model, optimizer)`` runs once the model is partitioned (at once if it already is)."""
        key = len(self._post_partition_hooks)
        self._post_partition_hooks[key] = hook
        if self.partitioned:
            hook(self, state.optimizer)
        return _RemovableHandle(self._post_partition_hooks, key)

    # --- plain use -------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._mode == "capture":
            raise _CapturedCall(args)
        if self._mode == "loss":
            return self._mb_output
        if state.topo().pp > 1:
            raise RuntimeError("smp: with pipeline_parallel_degree > 1 call the model inside an @smp.step function")
        return self.module(*args, **kwargs)

    def backward(self, tensors: Any, grad_tensors: Any = None) -> None:
        """Call inside @smp.step instead of loss.backward() / torch.autograd.backward(tensors, grad_tensors)."""
        if self._mode == "loss":
            if grad_tensors is not None:
                raise NotImplementedError("smp: model.backward(outputs, grad_tensors) is not supported with "
                                          "pipeline_parallel_degree > 1 here; "
                                          "call model.backward(loss) with a scalar loss")
            self._mb_loss = tensors  # the pipeline schedule runs backward
            return
        scale = 1.0 / state.cfg.microbatches if self.average_grads_across_microbatches else 1.0
        if grad_tensors is None:
            (tensors * scale).backward()
        else:
            grads = ([g * scale for g in grad_tensors] if isinstance(grad_tensors, (list, tuple))
                     else grad_tensors * scale)
            torch.autograd.backward(tensors, grads)

    # --- what this rank holds ------------------------------------------------------------------
    def local_modules(self) -> list[nn.Module]:
        return self._pipeline.modules if self._pipeline is not None else [self.module]

    def local_named_modules(self) -> Iterator[tuple[str, nn.Module]]:
        for m in self.local_modules():
            yield from m.named_modules()

    def local_named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        for m in self.local_modules():
            yield from m.named_parameters()

    def local_parameters(self) -> Iterator[nn.Parameter]:
        for _, p in self.local_named_parameters():
            yield p

    def local_named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for m in self.local_modules():
            yield from m.named_buffers()

    def local_buffers(self) -> Iterator[torch.Tensor]:
        for _, b in self.local_named_buffers():
            yield b

    def distributed_modules(self) -> Iterator[nn.Module]:
        """The tensor-parallel modules (their parameters are split over the tp group)."""
        for _, m in self.local_named_modules():
            if any(isinstance(p, DTensor) for p in m.parameters(recurse=False)):
                yield m

    def is_distributed_parameter(self, param: torch.Tensor) -> bool:
        return isinstance(param, DTensor)

    def is_distributed_buffer(self, buf: torch.Tensor) -> bool:
        return isinstance(buf, DTensor)

    # A distributed module works on the tp group's whole batch ("scaled batch"), so its parameters reduce over rdp.
    is_scaled_batch_parameter = is_distributed_parameter
    is_scaled_batch_buffer = is_distributed_buffer

    def default_reducer_named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Parameters all-reduced over the DP_GROUP."""
        return ((n, p) for n, p in self.local_named_parameters() if not isinstance(p, DTensor))

    def scaled_batch_reducer_named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Parameters all-reduced over the RDP_GROUP."""
        return ((n, p) for n, p in self.local_named_parameters() if isinstance(p, DTensor))

    def cpu(self) -> nn.Module:  # type: ignore[override]
        """The full model on the CPU (tensor-parallel shards gathered; with pipeline stages, this rank's stages)."""
        with torch.no_grad():
            for m in self.local_modules():
                for name, p in list(m.named_parameters()):
                    full = p.full_tensor() if isinstance(p, DTensor) else p.detach()
                    _set(m, name, nn.Parameter(full.cpu(), requires_grad=p.requires_grad))
                for name, b in list(m.named_buffers()):
                    _set(m, name, (b.full_tensor() if isinstance(b, DTensor) else b).cpu())
        return self

    @contextlib.contextmanager
    def join(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        """Uneven inputs: not supported here; every rank must run the same number of steps."""
        raise NotImplementedError("smp.DistributedModel.join(): uneven inputs across ranks are not supported here; "
                                  "give every rank the same number of batches "
                                  "(e.g. DistributedSampler(drop_last=True))")
        yield  # pragma: no cover

    def register_comm_hook(self, state_: Any, hook: Callable) -> None:
        raise NotImplementedError("smp.DistributedModel.register_comm_hook(): gradients are averaged by "
                                  "DistributedOptimizer.step() here (no DDP reducer to hook into); not supported")

    def local_state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in self.local_modules():
            out.update(m.state_dict())
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
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

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:  # Any: Module's overloads return T_destination too
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
            self._after_partition()
        self._pipeline.schedule._loss_fn = loss_fn  # the step body (and its closure) changes per call
        full = tuple(torch.cat([mb[j] for mb in inputs]).to(self.device) for j in range(len(inputs[0])))
        mb_ids = torch.arange(len(mbs), device=self.device).reshape(len(mbs), 1)
        rt = self._pipeline
        args = full if rt.has_first else ()
        kwargs: dict[str, Any] = {"target": mb_ids} if rt.has_last else {}
        rt.schedule.step(*args, **kwargs)
        # Every pipeline rank gets the step's outputs, as in SMP v1.
        last = topo.pp - 1
        holder = [results if rt.has_last else None]
        group = topo.group("pp")
        src = dist.get_global_rank(group, last)
        if rt.has_last:
            holder = [[_to_cpu(r) for r in results]]
        dist.broadcast_object_list(holder, src=src, group=group)
        return cast(list[Any], holder[0])  # broadcast filled it on every rank

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
                              loss_fn, prepare, manual_points=manual_split_points(self.module))

    def parameters(self, recurse: bool = True):
        if self._pipeline is None:
            yield from self.module.parameters(recurse)
            return
        for m in self._pipeline.modules:
            yield from m.parameters(recurse)


class _RemovableHandle:
    def __init__(self, hooks: dict[int, Callable], key: int) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


def _set(module: nn.Module, dotted: str, value: Any) -> None:
    parent, _, leaf = dotted.rpartition(".")
    owner = module.get_submodule(parent) if parent else module
    if isinstance(value, nn.Parameter):
        owner._parameters[leaf] = value
    else:
        owner._buffers[leaf] = value


_NO_EFFECT_DEFAULTS = {"trace_execution_times": False, "overlapping_allreduce": True, "backward_passes_per_step": 1,
                       "bucket_cap_mb": 25, "trace_memory_usage": False, "gradient_as_bucket_view": False}


def _warn_unused_arguments(**given: Any) -> None:
    for key, value in given.items():
        if key not in _NO_EFFECT_DEFAULTS:
            warn_once(f"dm-{key}", f"DistributedModel({key}=...) is not an SMP v1 argument; it has no effect here")
        elif value != _NO_EFFECT_DEFAULTS[key]:
            warn_once(f"dm-{key}", f"DistributedModel({key}={value!r}) tunes SMP's tracer / DDP reducer; it has no "
                      "effect here (gradients are averaged once per step by DistributedOptimizer.step())")


@torch.no_grad()
def broadcast_from_first_replica(tensors: list[torch.Tensor]) -> None:
    """Replicated tensors from dp rank 0 over the dp group; tensor-parallel shards from rdp rank 0 over rdp."""
    topo = state.topo()
    if topo.dp == 1:
        return
    plain = [t for t in tensors if not isinstance(t, DTensor)]
    split = [t.to_local() for t in tensors if isinstance(t, DTensor)]
    for items, dims in ((plain, topo.dp_dims), (split, "rdp")):
        group = topo.group(dims)
        if not items or dist.get_world_size(group) == 1:
            continue
        src = dist.get_global_rank(group, 0)
        for t in items:
            dist.broadcast(t.data, src=src, group=group)


def _drop_pipeline(model: DistributedModel) -> None:
    model._pipeline = None


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cpu(v) for v in value)
    return value
