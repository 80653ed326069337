"""SMP v1 communication helpers over the v1 groups (objects are pickled, as in SMP).

``broadcast`` sends the object point-to-point to every other member of the group, so a receiver's ``recv_from``
matches either a ``send`` or a ``broadcast`` (SMP's contract: the receiver does not say which one the sender used).
"""
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
WORLD_RANK = RankType.WORLD_RANK
MP_RANK = RankType.MP_RANK
DP_RANK = RankType.DP_RANK
TP_RANK = RankType.TP_RANK
PP_RANK = RankType.PP_RANK
RDP_RANK = RankType.RDP_RANK


def _as_group(group: Any) -> CommGroup:
    if isinstance(group, CommGroup):
        return group
    if isinstance(group, RankType):
        return CommGroup.WORLD if group is RankType.WORLD_RANK else CommGroup(group.value)
    raise TypeError(f"smp: expected an smp.CommGroup (smp.WORLD, smp.MP_GROUP, smp.DP_GROUP, smp.TP_GROUP, "
                    f"smp.PP_GROUP, smp.RDP_GROUP), got {group!r}")


def process_group(group: CommGroup = CommGroup.WORLD) -> Any:
    topo = state.topo()
    group = _as_group(group)
    if group is CommGroup.WORLD:
        return dist.group.WORLD
    if group is CommGroup.DP_GROUP:
        return topo.group(topo.dp_dims)
    if group is CommGroup.MP_GROUP:
        return topo.group(("pp", "tp"))
    return topo.group(group.value)


def group_ranks(group: CommGroup) -> list[int]:
    """Global ranks of this process's ``group``, in the group's rank order."""
    pg = process_group(group)
    return [dist.get_global_rank(pg, i) for i in range(dist.get_world_size(pg))]


def _global(rank: int, rank_type: RankType, what: str) -> int:
    ranks = group_ranks(_as_group(rank_type))
    if not 0 <= rank < len(ranks):
        raise ValueError(f"smp.{what}: rank {rank} is out of range for {rank_type} (the group has {len(ranks)} ranks)")
    return ranks[rank]


def barrier(group: CommGroup = CommGroup.WORLD) -> None:
    dist.barrier(group=process_group(group))


def dp_barrier() -> None:
    barrier(CommGroup.DP_GROUP)


def mp_barrier() -> None:
    barrier(CommGroup.MP_GROUP)


def send(obj: Any, dest_rank: int, rank_type: RankType = RankType.WORLD_RANK) -> None:
    """Send ``obj`` to ``dest_rank`` (counted in ``rank_type``'s group of this process); returns once received."""
    dst = _global(dest_rank, rank_type, "send")
    if dst == dist.get_rank():
        raise ValueError("smp.send: dest_rank is this process")
    dist.send_object_list([obj], dst=dst)


def broadcast(obj: Any, group: CommGroup = CommGroup.WORLD) -> None:
    """Send ``obj`` from this rank to the rest of ``group`` (each calls recv_from)."""
    me = dist.get_rank()
    for dst in group_ranks(group):
        if dst != me:
            dist.send_object_list([obj], dst=dst)


def recv_from(src_rank: int, rank_type: RankType = RankType.WORLD_RANK) -> Any:
    """Receive what rank ``src_rank`` (counted in ``rank_type``'s group) sent or broadcast."""
    holder = [None]
    dist.recv_object_list(holder, src=_global(src_rank, rank_type, "recv_from"))
    return holder[0]


def allgather(obj: Any, group: CommGroup = CommGroup.WORLD) -> list[Any]:
    pg = process_group(group)
    out: list[Any] = [None] * dist.get_world_size(pg)
    dist.all_gather_object(out, obj, group=pg)
    return out
