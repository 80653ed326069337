"""One group's NVLink fast-path set-up, shared by both process-group flavours.

The Python group (cuda_path.CudaPath) and the native backend's helper (native_backend.NativeHelper)
both call :func:`set_up_fast_paths` at a group's first fast call (collective: every rank at the same
call): the on/off switches, the topology check, the symmetric-memory helper group, the copy-engine
AllGather with the SMDDP_CE_* settings read in one place (fast_allgather.ce_options), and the ranks'
agreement on what sets the number of barriers per AllGather call. Each caller adds its AllReduce buffers.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from .fast_allgather import CopyEngineAllGather


@dataclass
class FastPaths:
    symm_name: str  # the symmetric-memory helper group's name (symm_buffers.register_group)
    allgather: CopyEngineAllGather


def set_up_fast_paths(
    store: dist.Store, rank: int, size: int, timeout: timedelta, device: torch.device, group_name: str,
) -> FastPaths | str:
    """The group's fast paths, or why they are off (every rank decides alike)."""
    if os.environ.get("SMDDP_DISABLE_FAST_PATHS", "0") == "1":
        return "SMDDP_DISABLE_FAST_PATHS=1"
    if size < 2:
        return "group of one rank"
    if not group_name:
        return "the group has no name yet"
    from .fast_allgather import CopyEngineAllGather, ce_options
    from .topology import exchange_locations, single_nvlink_island

    options = ce_options(size)
    ok, why = single_nvlink_island(exchange_locations(store, rank, size, device.index or 0))
    if not ok:
        return why
    try:
        from .symm_buffers import register_group

        symm_name = register_group(group_name, store, rank, size, timeout)
        allgather = CopyEngineAllGather(symm_name, device, rank, size, options)
    except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
        return f"symmetric memory unavailable ({exc})"
    differ = disagreement(store, rank, size, "ce-plan", allgather.barrier_plan())
    return differ or FastPaths(symm_name, allgather)


def disagreement(store: dist.Store, rank: int, size: int, what: str, value: str) -> str | None:
    """Exchange ``value`` through the group's store; None when every rank has the same, else a reason
    naming each rank's value (the same text on every rank, so every rank turns the fast path off)."""
    store.set(f"smddp/{what}/{rank}", value)
    values = [store.get(f"smddp/{what}/{r}").decode() for r in range(size)]
    if len(set(values)) == 1:
        return None
    return (f"the ranks' copy-engine settings differ ({', '.join(f'rank {r}: {v}' for r, v in enumerate(values))}): "
            "set SMDDP_CE_CHUNKS / SMDDP_CE_KERNEL_STAGE / SMDDP_NATIVE alike on every rank")
