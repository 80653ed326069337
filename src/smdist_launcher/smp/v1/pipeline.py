"""SMP v1 pipeline parallelism on torch.distributed.pipelining.

The model is traced once at the first step (with a real microbatch, as SMP v1 partitions then) and cut
before top-level children so that stages hold about equal parameter counts. "simple" runs GPipe;
"interleaved" runs Interleaved1F1B with two stages per rank when the model has enough children and the
microbatch count is a multiple of the pipeline degree, else 1F1B (one stage per rank).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage, SplitPoint, pipeline
from torch.distributed.pipelining.schedules import (
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    _PipelineSchedule,
)
from torch.distributed.pipelining.stage import _PipelineStageBase


def balanced_split_points(module: nn.Module, n_stages: int) -> list[str]:
    """Names of top-level children that start stages 1..n-1, balancing parameter counts."""
    children = [(n, sum(p.numel() for p in m.parameters())) for n, m in module.named_children()]
    children = [(n, max(c, 1)) for n, c in children]
    if len(children) < n_stages:
        raise ValueError(f"smp: pipeline_parallel_degree needs {n_stages} stages but the model has only "
                         f"{len(children)} top-level children to cut between")
    total = sum(c for _, c in children)
    points, acc, stage = [], 0, 1
    for i, (name, count) in enumerate(children):
        remaining_children = len(children) - i
        remaining_stages = n_stages - stage
        if stage < n_stages and i > 0 and (acc >= total * stage / n_stages or remaining_children <= remaining_stages):
            points.append(name)
            stage += 1
        acc += count
    return points


@dataclass
class PipelineRuntime:
    schedule: _PipelineSchedule
    stages: list[PipelineStage]
    modules: list[nn.Module]
    has_first: bool
    has_last: bool


def build_pipeline(module: nn.Module, example_args: tuple, pp_rank: int, pp_size: int, microbatches: int,
                   kind: str, device: torch.device, group: Any, loss_fn: Callable,
                   prepare_stage: Callable[[nn.Module], None],
                   manual_points: list[str] | None = None) -> PipelineRuntime:
    interleave = (manual_points is None and kind == "interleaved" and microbatches % pp_size == 0
                  and len(list(module.named_children())) >= 2 * pp_size)
    per_rank = 2 if interleave else 1
    n_stages = pp_size * per_rank
    points = manual_points if manual_points is not None else balanced_split_points(module, n_stages)
    pipe = pipeline(module, mb_args=example_args, split_spec={p: SplitPoint.BEGINNING for p in points})
    indices = [pp_rank + k * pp_size for k in range(per_rank)]
    modules: list[nn.Module] = []
    stages: list[PipelineStage] = []
    for idx in indices:
        sub = pipe.get_stage_module(idx).to(device)
        prepare_stage(sub)
        modules.append(sub)
        stages.append(PipelineStage(sub, idx, n_stages, device, group=group))
    if per_rank == 2:
        schedule: _PipelineSchedule = ScheduleInterleaved1F1B(cast(list[_PipelineStageBase], stages),  # invariant list
                                                            n_microbatches=microbatches, loss_fn=loss_fn)
    elif kind == "simple":
        schedule = ScheduleGPipe(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    else:
        schedule = Schedule1F1B(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    return PipelineRuntime(schedule=schedule, stages=stages, modules=modules,
                           has_first=0 in indices, has_last=n_stages - 1 in indices)
