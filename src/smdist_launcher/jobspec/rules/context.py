"""What every rule reads: the (possibly partial) validated arguments plus facts derived once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..catalog import is_known, lookup

if TYPE_CHECKING:  # pragma: no cover
    from ..estimator_args import EstimatorArgs, InstanceGroup
    from ..resolved import InstanceInfo
    from ..strategy import Launch


# what the world size is derived from; SMP parameters, MPI option strings and the group name are read from
# distribution but size nothing
_SIZING = ("distribution", "instance_count", "instance_type", "instance_groups")
_NOT_SIZING = ("distribution.smdistributed.modelparallel.parameters", "distribution.instance_groups")
# the blocks whose enabled flag chooses the launcher (mpi's own block aside)
_STRATEGY_BLOCKS = tuple(f"distribution.{k}" for k in (
    "torch_distributed", "pytorchddp", "parameter_server", "multi_worker_mirrored_strategy", "pytorchxla",
    "smdistributed.dataparallel", "smdistributed.modelparallel.enabled"))


@dataclass
class RuleContext:
    args: EstimatorArgs
    framework: str
    broken: frozenset[str] = frozenset()   # paths pydantic already reported (their values were dropped)
    check_source: bool = True
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # imported here: the estimators import this module (cluster_of) before any schema (pydantic) is needed
        from ..estimator_args import base_framework
        from ..strategy import decide

        self.base_framework = base_framework(self.args)
        self.instance_type, self.instance_count = cluster_of(self.args)
        self.instance: InstanceInfo | None = (
            lookup(self.instance_type) if self.instance_type and is_known(self.instance_type) else None
        )
        self.launch: Launch = decide(self.args.distribution, self.instance)
        if self.touches_broken(*_STRATEGY_BLOCKS):
            # the strategy the user meant was dropped (a typo in its key), so a lone mpi block only looks orphaned
            self.launch.errors = [e for e in self.launch.errors if e.path != "distribution.mpi.enabled"]

    def touches_broken(self, *prefixes: str) -> bool:
        """True if pydantic rejected something under any of `prefixes` (so derived facts may be off)."""
        return any(b == p or b.startswith(p + ".") or b.startswith(p + "[") for b in self.broken for p in prefixes)

    @property
    def world_size(self) -> int | None:
        """instance_count × processes_per_host, or None when unknown (or derived from values pydantic dropped)."""
        if self.instance_count is None or self.launch.strategy is None:
            return None
        sizing = [b for b in self.broken if not b.startswith(_NOT_SIZING) and not b.endswith(".custom_mpi_options")]
        if any(b == p or b.startswith((p + ".", p + "[")) for b in sizing for p in _SIZING):
            return None
        return self.instance_count * self.launch.processes_per_host

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def distribution_group(args: EstimatorArgs) -> InstanceGroup | None:
    """The instance group whose hosts run the distribution's ranks (SageMaker: the one group named in
    distribution.instance_groups, or the only group); for several groups and none named, the first (a job
    without distribution then runs its script on every host alike)."""
    groups = args.instance_groups
    if not groups or args.instance_type is not None:
        return None
    named = (args.distribution.instance_groups or []) if args.distribution is not None else []
    for group in groups:
        if named and group.instance_group_name == named[0]:
            return group
    return groups[0]


def cluster_of(args: EstimatorArgs) -> tuple[str | None, int | None]:
    """(instance_type, instance_count) of the hosts the ranks run on: from the arguments, or from the distribution's
    instance group (heterogeneous clusters)."""
    group = distribution_group(args)
    if group is not None:
        return group.instance_type, group.instance_count
    return args.instance_type, args.instance_count


def host_count(args: EstimatorArgs) -> int | None:
    """Every host of the job (all instance groups together)."""
    if args.instance_groups and args.instance_type is None:
        return sum(g.instance_count for g in args.instance_groups)
    return args.instance_count
