"""Which distribution blocks fit together and with which framework (sagemaker-sdk.md §1-2, issue 2 §3)."""
from __future__ import annotations

from collections.abc import Iterator

from ...errors import ErrorItem
from ..error_items import item
from .context import RuleContext

_PT = frozenset({"pytorchddp", "torch_distributed", "smdistributed", "mpi", "pytorchxla", "instance_groups"})
_TF = frozenset({"parameter_server", "mpi", "smdistributed", "multi_worker_mirrored_strategy", "instance_groups"})
ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "pytorch": _PT,
    "tensorflow": _TF,
    "mxnet": frozenset({"parameter_server", "mpi", "instance_groups"}),
}
_WHY = {
    ("pytorch", "parameter_server"): "the PyTorch container has no parameter-server runner (each host would train alone); "
                                     "use torch_distributed or pytorchddp",
    ("pytorch", "multi_worker_mirrored_strategy"): "it is a TensorFlow strategy; use torch_distributed",
}


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    yield from ctx.launch.errors
    dist = ctx.args.distribution
    if dist is None:
        return
    allowed = ALLOWED_KEYS.get(ctx.base_framework)
    if allowed is not None:
        label = ctx.framework if ctx.framework == ctx.base_framework else f"{ctx.framework} ({ctx.base_framework})"
        for key in sorted(dist.model_fields_set - allowed):
            why = _WHY.get((ctx.base_framework, key), f"{label} supports: {', '.join(sorted(allowed - {'instance_groups'}))}")
            yield item(f"distribution.{key}", f"is not available for {label}: {why}", dist.normalized()[key])
    if dist.instance_groups is not None:
        if ctx.launch.strategy == "single":
            yield item("distribution.instance_groups", "names instance groups for a distribution strategy, but none is "
                                                       "enabled; enable one or remove instance_groups", dist.instance_groups)
        groups = [g.instance_group_name for g in ctx.args.instance_groups or []]
        if not groups:
            yield item("distribution.instance_groups", "names instance groups, but the estimator has no instance_groups; "
                                                       "remove it or define instance_groups", dist.instance_groups)
        else:
            for i, name in enumerate(dist.instance_groups):
                if name not in groups:
                    yield item(f"distribution.instance_groups[{i}]", f"unknown instance group; defined: {', '.join(groups)}", name)
