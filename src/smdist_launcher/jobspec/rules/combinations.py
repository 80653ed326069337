"""Which distribution blocks fit together and with which framework (sagemaker-sdk.md §1-2, issue 2 §3)."""
from __future__ import annotations

from collections.abc import Iterator

from ...errors import ErrorItem
from ..error_items import item
from .context import RuleContext
from .instances import STRATEGY_KEY

# AWS's SMDDP support table ("Supported Instance Types", distributed-data-parallel-support) and the SDK's
# SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES list exactly these four; the SDK refuses P5 for smdistributed without
# torch_distributed ("SMModelParallel and SMDataParallel currently do not support p5 instances").
SMDDP_INSTANCE_TYPES = ("ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge")
# DLC images built without SMDDP/SMP binaries (the SDK's UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM)
IMAGES_WITHOUT_SMDISTRIBUTED = ("2.0.1-gpu-py310-cu121",)
_SMDDP = {"smddp": "smdistributed.dataparallel", "pytorchddp": "pytorchddp (runs SMDDP)"}

_PT = frozenset({"pytorchddp", "torch_distributed", "smdistributed", "mpi", "pytorchxla", "instance_groups"})
_TF = frozenset({"parameter_server", "mpi", "smdistributed", "multi_worker_mirrored_strategy", "instance_groups"})
ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "pytorch": _PT,
    "tensorflow": _TF,
    "mxnet": frozenset({"parameter_server", "mpi", "instance_groups"}),
}
_WHY = {
    ("pytorch", "parameter_server"): "the PyTorch container has no parameter-server runner (each host would train "
                                     "alone); use torch_distributed or pytorchddp",
    ("pytorch", "multi_worker_mirrored_strategy"): "it is a TensorFlow strategy; use torch_distributed",
}


def _smdistributed(ctx: RuleContext) -> Iterator[ErrorItem]:
    """SMDDP / SMP v1 need instances and images that ship the libraries (local mode runs our own smddp/smp)."""
    strategy, info = ctx.launch.strategy, ctx.instance
    if strategy not in ("smddp", "pytorchddp", "smp_v1"):
        return
    image = ctx.args.image_uri or ""
    for bad in IMAGES_WITHOUT_SMDISTRIBUTED:
        if bad in image:
            yield item("image_uri", f"this image ({bad}) ships without SMDDP and SMP; use another PyTorch image "
                                    "(e.g. 2.0.1-gpu-py310 or 2.1+) or torch_distributed", image)
    if info is None or info.local or not info.gpus:
        return  # no-GPU and Trainium instances are reported by the instance rules
    if strategy in _SMDDP and info.instance_type not in SMDDP_INSTANCE_TYPES:
        yield item(STRATEGY_KEY[strategy],
                   f"{_SMDDP[strategy]} is supported on {', '.join(SMDDP_INSTANCE_TYPES)} only, "
                   f"not {info.instance_type}; choose one of them or use torch_distributed",
                   info.instance_type)
    elif strategy == "smp_v1" and info.instance_type.startswith("ml.p5."):
        yield item(STRATEGY_KEY[strategy], f"SMP v1 (smdistributed.modelparallel with mpi) does not support "
                                           f"{info.instance_type}; use SMP v2 (torch_distributed) or a P4d instance",
                   info.instance_type)


# Launchers that restart their ranks in place: torchrun on one host (--max-restarts), and a lone process per host
# (its host's runtime starts it again). mpirun's ranks span hosts through orteds that end with it, and torchrun's
# static rendezvous across hosts cannot restart (each host's agent would restart alone and read the last round's
# peer addresses): there only a whole-job restart helps.
_TORCHRUN = ("torch_distributed", "smp_v2")


def _process_restarts(ctx: RuleContext) -> Iterator[ErrorItem]:
    r = ctx.args.resilience
    strategy = ctx.launch.strategy
    if r is None or not r.process_restarts or strategy is None or strategy == "single":
        return
    if strategy in _TORCHRUN and (ctx.instance_count or 1) > 1:
        why = (f"torchrun restarts ranks in place on one host only; across {ctx.instance_count} hosts its static "
               "rendezvous cannot restart")
    elif strategy in _TORCHRUN:
        return
    else:
        why = f"the {strategy} launcher starts its ranks across the hosts at once"
    yield item("resilience.process_restarts",
               f"{why}, so only a whole-job restart helps: remove process_restarts and use max_retry_attempts "
               "(process restarts work for torchrun on one host and for one process per host)", r.process_restarts)


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    yield from ctx.launch.errors
    yield from _smdistributed(ctx)
    yield from _process_restarts(ctx)
    dist = ctx.args.distribution
    if dist is None:
        return
    allowed = ALLOWED_KEYS.get(ctx.base_framework)
    if allowed is not None:
        label = ctx.framework if ctx.framework == ctx.base_framework else f"{ctx.framework} ({ctx.base_framework})"
        for key in sorted(dist.model_fields_set - allowed):
            why = _WHY.get((ctx.base_framework, key),
                           f"{label} supports: {', '.join(sorted(allowed - {'instance_groups'}))}")
            yield item(f"distribution.{key}", f"is not available for {label}: {why}", dist.normalized()[key])
    if dist.instance_groups is not None:
        if ctx.launch.strategy == "single":
            yield item("distribution.instance_groups",
                       "names instance groups for a distribution strategy, but none is enabled; enable one or remove "
                       "instance_groups", dist.instance_groups)
        groups = [g.instance_group_name for g in ctx.args.instance_groups or []]
        if not groups:
            yield item("distribution.instance_groups",
                       "names instance groups, but the estimator has no instance_groups; "
                       "remove it or define instance_groups", dist.instance_groups)
        else:
            for i, name in enumerate(dist.instance_groups):
                if name not in groups:
                    yield item(f"distribution.instance_groups[{i}]",
                               f"unknown instance group; defined: {', '.join(groups)}", name)
