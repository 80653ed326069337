"""SMP parameter rules (SageMaker's validate_mp_config, moved to construction time) and degree arithmetic.

Arithmetic is against world size = instance_count × processes_per_host.
"""
from __future__ import annotations

from collections.abc import Iterator

from ...errors import ErrorItem
from ..error_items import item
from ..smp_parameters import SMPParameters
from .context import RuleContext

P = "distribution.smdistributed.modelparallel.parameters"


def _v1(p: SMPParameters, world: int | None, shaky: frozenset[str]) -> Iterator[ErrorItem]:
    given = p.given()
    if (p.partitions is not None and p.pipeline_parallel_degree is not None
            and p.partitions != p.pipeline_parallel_degree):
        yield item(f"{P}.partitions",
                   f"is an alias of pipeline_parallel_degree ({p.pipeline_parallel_degree}); give only one",
                   p.partitions)
    pp = p.pipeline_parallel_degree or p.partitions or 1
    tp = p.tensor_parallel_degree or 1
    if p.auto_partition is False and p.default_partition is None:
        yield item(f"{P}.default_partition", "is required when auto_partition is false (the partition for modules "
                                             "without an explicit smp.partition)")
    pp_known = not shaky & {"partitions", "pipeline_parallel_degree"}
    if p.default_partition is not None and p.default_partition >= pp and pp_known:
        yield item(f"{P}.default_partition",
                   f"must be less than the number of partitions ({pp}), got {p.default_partition}",
                   p.default_partition)
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in given and not p.ddp:
            yield item(f"{P}.{key}", "needs ddp: true as well", getattr(p, key))
    if p.ddp and p.horovod:
        yield item(f"{P}.horovod", "ddp and horovod cannot both be enabled; keep one", True)
    if (p.fp16 or p.fp16_params) and p.bf16:
        yield item(f"{P}.bf16", "fp16 and bf16 cannot both be enabled; keep one", True)
    if tp > 1 and not p.ddp:
        yield item(f"{P}.ddp", f"tensor parallelism (tensor_parallel_degree {tp}) needs ddp: true", p.ddp)
    if world is None:
        return
    yield from _divides(world, {"pipeline_parallel_degree" if "pipeline_parallel_degree" in given else "partitions": pp,
                                "tensor_parallel_degree": tp})
    if shaky:
        return  # a product with an unknown degree in it would be made up
    if pp * tp > 1 and world % pp == 0 and world % tp == 0 and world % (pp * tp):
        yield item(f"{P}.tensor_parallel_degree",
                   f"pipeline_parallel_degree × tensor_parallel_degree = {pp * tp} must divide "
                   f"the world size {world}", tp)
    sdp = p.sharded_data_parallel_degree
    if sdp is not None and world % (pp * tp) == 0 and (world // (pp * tp)) % sdp:
        yield item(f"{P}.sharded_data_parallel_degree", f"must divide the data-parallel degree world/(pp×tp) = "
                                                        f"{world // (pp * tp)}", sdp)


def _v2(p: SMPParameters, world: int | None) -> Iterator[ErrorItem]:
    tp = p.tensor_parallel_degree or 1
    ep = p.expert_parallel_degree or 1
    if ep > 1 and tp > 1:
        yield item(f"{P}.expert_parallel_degree", "expert parallelism is not compatible with tensor parallelism "
                                                  f"(tensor_parallel_degree {tp}); set one of them to 1", ep)
    if world is None:
        return
    yield from _divides(world, {"tensor_parallel_degree": tp, "expert_parallel_degree": ep})
    if world % tp:
        return
    rest = world // tp
    hsd = p.hybrid_shard_degree
    if hsd is not None and hsd > 1 and rest % hsd:
        yield item(f"{P}.hybrid_shard_degree",
                   f"must divide world size / tensor_parallel_degree = {world}/{tp} = {rest} "
                   "(0 = shard over all of them, 1 = no sharding)", hsd)
    cp = p.context_parallel_degree
    if cp is not None and cp > 1:
        limit = hsd if hsd and hsd > 0 else rest
        if cp > limit:
            what = (f"hybrid_shard_degree ({hsd})" if hsd and hsd > 0
                    else f"world size / tensor_parallel_degree ({rest})")
            yield item(f"{P}.context_parallel_degree", f"must be ≤ {what}", cp)
        elif rest % cp:
            yield item(f"{P}.context_parallel_degree", f"must divide world size / tensor_parallel_degree = {rest}", cp)


def _divides(world: int, degrees: dict[str, int]) -> Iterator[ErrorItem]:
    for key, degree in degrees.items():
        if degree > 1 and world % degree:
            yield item(f"{P}.{key}", f"must divide the world size {world} (instance_count × processes_per_host); "
                                     f"use a divisor of {world} or change the cluster", degree)


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    dist = ctx.args.distribution
    if dist is None or not dist.modelparallel_on:
        return
    params = dist.smp_parameters
    # a degree pydantic rejected reads as its default here; arithmetic that combines it would blame the wrong key
    shaky = frozenset(k for k in ("partitions", "pipeline_parallel_degree", "tensor_parallel_degree")
                      if ctx.touches_broken(f"{P}.{k}"))
    if ctx.launch.strategy == "smp_v1":
        yield from _v1(params, ctx.world_size, shaky)
    elif ctx.launch.strategy == "smp_v2":
        yield from _v2(params, ctx.world_size)
