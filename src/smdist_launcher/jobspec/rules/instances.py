"""Instance rules: the cluster is fully described, the type exists, and the distribution fits its hardware."""
from __future__ import annotations

from collections.abc import Iterator

from ...errors import ErrorItem
from ..catalog import is_known, is_local, is_trainium, known_instance_types
from ..error_items import did_you_mean, item
from .context import RuleContext, host_count

STRATEGY_KEY = {
    "smddp": "distribution.smdistributed", "smp_v1": "distribution.smdistributed",
    "smp_v2": "distribution.smdistributed", "pytorchddp": "distribution.pytorchddp", "mpi": "distribution.mpi",
    "parameter_server": "distribution.parameter_server",
    "multi_worker_mirrored_strategy": "distribution.multi_worker_mirrored_strategy",
    "torch_distributed": "distribution.torch_distributed",
}
# CreateTrainingJob sets no maximum on InstanceCount: each account's quota does (adjustable, per instance type; see
# Service Quotas, Amazon SageMaker). This bound only keeps a typo (2**31 hosts) from planning itself out of memory.
MAX_INSTANCE_COUNT = 4096
# Without a catalog vCPU count: a process per vCPU of the largest instances, with room to spare.
MAX_PROCESSES_PER_HOST = 256
PPH_PATH = "distribution.mpi.processes_per_host"
_NEEDS_GPU = {"smddp": "smdistributed.dataparallel", "pytorchddp": "pytorchddp",
              "smp_v1": "smdistributed.modelparallel",
              "smp_v2": "smdistributed.modelparallel"}


# Strategies SageMaker runs on one group of a heterogeneous cluster (the SDK's _distribution_configuration accepts
# instance groups only next to mpi or smdistributed, and PyTorch's next to torch_distributed).
HETERO_STRATEGIES = frozenset({"single", "mpi", "smddp", "pytorchddp", "smp_v1", "torch_distributed", "smp_v2"})


def _completeness(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    if args.instance_groups is not None:
        if args.instance_type is not None or args.instance_count is not None:
            yield item("instance_groups", "give either instance_type + instance_count or instance_groups, not both",
                       [g.instance_group_name for g in args.instance_groups])
        elif not args.instance_groups:
            yield item("instance_groups", "must define one instance group (instance_group_name, instance_type, "
                                          "instance_count), or use instance_type + instance_count instead", [])
        else:
            yield from _groups(ctx)
        return
    if args.instance_type is None and "instance_type" not in ctx.broken:
        yield item("instance_type",
                   "is required, e.g. 'ml.p4d.24xlarge' (or 'local' / 'local_gpu' to run on this machine)")
    if args.instance_count is None and "instance_count" not in ctx.broken:
        yield item("instance_count", "is required, e.g. 1")


def _groups(ctx: RuleContext) -> Iterator[ErrorItem]:
    """Instance groups: distinct names, one kind of machine (all local or all ml.*), a strategy SageMaker runs on
    groups, and with several groups the distribution on exactly one named group."""
    groups = ctx.args.instance_groups or []
    seen: set[str] = set()
    for i, g in enumerate(groups):
        if g.instance_group_name in seen:
            yield item(f"instance_groups[{i}].instance_group_name", "is used by an earlier group; every instance group "
                                                                    "needs its own name", g.instance_group_name)
        seen.add(g.instance_group_name)
    local = [is_local(g.instance_type) for g in groups]
    if any(local) and not all(local):
        yield item("instance_groups", "mixes local instance types with ml.* ones; local mode runs every group on this "
                                      "machine: give every group a local type, or none",
                   [g.instance_type for g in groups])
    elif all(local) and len({g.instance_type for g in groups}) > 1:
        yield item("instance_groups", "local mode runs every group with one local instance type; use the same one "
                                      "(local or local_gpu) for every group", [g.instance_type for g in groups])
    strategy = ctx.launch.strategy
    if strategy is None or ctx.touches_broken("distribution"):
        return
    dist = ctx.args.distribution
    if strategy not in HETERO_STRATEGIES:
        # the SDK refuses these with any instance_groups, one group included ("Don't set training instance groups
        # while no distribution strategies enabled!")
        yield item(STRATEGY_KEY.get(strategy, "distribution"),
                   f"{strategy} cannot run on instance groups (SageMaker runs "
                   "only mpi, smdistributed, pytorchddp and torch_distributed "
                   "there); use instance_type + instance_count")
    elif strategy != "single" and len(groups) > 1 and (dist is None or not dist.instance_groups):
        yield item("distribution.instance_groups",
                   "is required with several instance groups: name the one group the "
                   f"distribution runs on, e.g. instance_groups: [{groups[-1].instance_group_name}] "
                   "(the other groups run the script once per host, on their own)")


def _known(ctx: RuleContext) -> Iterator[ErrorItem]:
    if ctx.args.instance_type is not None or not ctx.args.instance_groups:
        checked = [("instance_type", ctx.instance_type)]
    else:
        checked = [(f"instance_groups[{i}].instance_type", g.instance_type)
                   for i, g in enumerate(ctx.args.instance_groups)]
    for path, instance_type in checked:
        if instance_type is None or is_known(instance_type):
            continue
        hint = did_you_mean(instance_type, known_instance_types())
        yield item(path,
                   f"unknown instance type{hint} (ml.<family>.<size> such as ml.p4d.24xlarge, or local, local_cpu, "
                   "local_gpu; new types go in smdist_launcher/jobspec/instances.json)", instance_type)


def _n(count: int) -> str:
    """1,234 (a huge number is not printed in full: past 4,300 digits Python refuses to)."""
    return f"{count:,}" if count.bit_length() <= 64 else f"about 10^{int(count.bit_length() * 0.30103)}"


def _count_path(ctx: RuleContext) -> str:
    if ctx.args.instance_count is not None or not ctx.args.instance_groups:
        return "instance_count"
    if len(ctx.args.instance_groups) > 1:
        return "instance_groups"
    return "instance_groups[0].instance_count"


def _bounds(ctx: RuleContext) -> Iterator[ErrorItem]:
    """Upper bounds on the cluster: SageMaker's for ml.* types, this machine's for local ones."""
    count, info = host_count(ctx.args), ctx.instance
    if count is None or ctx.touches_broken("instance_count", "instance_groups"):
        return
    if info is not None and info.local:
        yield from _local_bounds(ctx, count)
        return
    if count > MAX_INSTANCE_COUNT:
        yield item(_count_path(ctx),
                   f"{_n(count)} instances; at most {MAX_INSTANCE_COUNT:,} per training job (and your "
                   "account's SageMaker quota for the instance type, usually far lower: see Service "
                   "Quotas)", count)
    pph = ctx.launch.processes_per_host
    limit, what = ((info.vcpus, f"{info.instance_type} has {info.vcpus} vCPUs") if info is not None and info.vcpus
                   else (MAX_PROCESSES_PER_HOST, "a fixed bound"))
    if ctx.launch.strategy is not None and pph > limit:
        yield item(PPH_PATH,
                   f"{_n(pph)} processes per host; at most {limit} ({what}): one process per GPU, Neuron core "
                   "or vCPU at most", pph)


def _local_bounds(ctx: RuleContext, count: int) -> Iterator[ErrorItem]:
    from ..local_capacity import capacity

    pph = ctx.launch.processes_per_host if ctx.launch.strategy is not None else 1
    if ctx.touches_broken("distribution"):
        pph = 1
    processes = count * (pph + 1)  # every rank, plus one runtime per simulated host
    room = capacity()
    if processes > room.processes:
        path = _count_path(ctx) if pph == 1 or count > room.processes // 2 else PPH_PATH
        yield item(path, f"local mode runs every host on this machine: {_n(count)} hosts × ({_n(pph)} processes + 1 "
                         f"runtime) = {_n(processes)} processes, more than this machine can hold (at most "
                         f"{room.processes:,}: {room.why}); lower instance_count or processes_per_host",
                   count if path != PPH_PATH else pph)


def _hardware(ctx: RuleContext) -> Iterator[ErrorItem]:
    info, strategy = ctx.instance, ctx.launch.strategy
    if info is None or strategy is None:
        return
    if is_trainium(info.instance_type) and strategy not in ("single", "torch_distributed"):
        yield item(STRATEGY_KEY[strategy],
                   f"is not supported on Trainium ({info.instance_type}); Trainium instances run "
                   "only torch_distributed")
    elif not info.local and info.gpus == 0 and strategy in _NEEDS_GPU:
        yield item(STRATEGY_KEY[strategy], f"{_NEEDS_GPU[strategy]} needs GPU instances (e.g. ml.p4d.24xlarge); "
                                           f"{info.instance_type} has no GPUs")
    if info.local:
        if ctx.args.use_spot_instances:
            yield item("use_spot_instances", "spot training is not supported with local instance types; remove it",
                       True)
        return
    pph = ctx.launch.processes_per_host
    for count, what in ((info.gpus, "GPUs"), (info.neuron_cores, "Neuron cores")):
        if count and pph > count:
            ctx.warn(f"distribution.mpi.processes_per_host: {_n(pph)} processes per host but "
                     f"{info.instance_type} has {count} "
                     f"{what}; ranks will share devices")
            return
    # more processes than vCPUs: an error (_bounds)


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    yield from _completeness(ctx)
    yield from _known(ctx)
    yield from _bounds(ctx)
    yield from _hardware(ctx)
