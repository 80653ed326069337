"""SMP v1 communication helpers over the v1 groups (objects are pickled, as in SMP)."""
from __future__ import annotations

import enum
from typing import Any

import torch.distributed as dist

from .state import state


class CommGroup(enum.Enum):
    WORLD = "world"
    MP_GROUP = "mp"
    DP_GROUP = "dp"
    TP_GROUP = "tp"
    PP_GROUP = "pp"
    RDP_GROUP = "rdp"


class RankType(enum.Enum):
    WORLD_RANK = "world"
    MP_RANK = "mp"
    DP_RANK = "dp"
    TP_RANK = "tp"
    PP_RANK = "pp"
    RDP_RANK = "rdp"


WORLD = CommGroup.WORLD
MP_GROUP = CommGroup.MP_GROUP
DP_GROUP = CommGroup.DP_GROUP
TP_GROUP = CommGroup.TP_GROUP
PP_GROUP = CommGroup.PP_GROUP
RDP_GROUP = CommGroup.RDP_GROUP


def process_group(group: CommGroup = CommGroup.WORLD) -> Any:
    topo = state.topo()
    if group is CommGroup.WORLD:
        return dist.group.WORLD
    if group is CommGroup.DP_GROUP:
        return topo.group(topo.dp_dims)
    if group is CommGroup.MP_GROUP:
        return topo.group(("pp", "tp"))
    return topo.group(group.value)


def barrier(group: CommGroup = CommGroup.WORLD) -> None:
    dist.barrier(group=process_group(group))


def dp_barrier() -> None:
    barrier(CommGroup.DP_GROUP)


def mp_barrier() -> None:
    barrier(CommGroup.MP_GROUP)


def broadcast(obj: Any, group: CommGroup = CommGroup.WORLD) -> None:
    """Send ``obj`` from this rank to the rest of ``group`` (they call recv_from)."""
    pg = process_group(group)
    dist.broadcast_object_list([obj], src=dist.get_rank(), group=pg)


def recv_from(src_rank: int, rank_type: RankType = RankType.WORLD_RANK) -> Any:
    """Receive what rank ``src_rank`` (counted in ``rank_type``'s group) broadcast."""
    group = CommGroup.WORLD if rank_type is RankType.WORLD_RANK else CommGroup(rank_type.value)
    pg = process_group(group)
    holder = [None]
    src = src_rank if group is CommGroup.WORLD else dist.get_global_rank(pg, src_rank)
    dist.broadcast_object_list(holder, src=src, group=pg)
    return holder[0]


def allgather(obj: Any, group: CommGroup = CommGroup.WORLD) -> list[Any]:
    pg = process_group(group)
    out: list[Any] = [None] * dist.get_world_size(pg)
    dist.all_gather_object(out, obj, group=pg)
    return out
