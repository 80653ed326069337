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
    from .fast_allgather import CeOptions, CopyEngineAllGather


@dataclass
class FastPaths:
    symm_name: str  # the symmetric-memory helper group's name (symm_buffers.register_group)
    allgather: CopyEngineAllGather


def set_up_fast_paths(
    store: dist.Store, rank: int, size: int, timeout: timedelta, device: torch.device, group_name: str,
    options: CeOptions | None = None, native_issuer: bool = False,
) -> FastPaths | str:
    """The group's fast paths, or why they are off (every rank decides alike). ``options``: the
    SMDDP_CE_* settings as read and checked at init_process_group (read now when not given), so a
    setting changed in between cannot fail this collective set-up on one rank only. ``native_issuer``:
    the native backend issues the AllGather's calls itself (CopyEngineAllGather.native_state)."""
    if os.environ.get("SMDDP_DISABLE_FAST_PATHS", "0") == "1":
        return "SMDDP_DISABLE_FAST_PATHS=1"
    if size < 2:
        return "group of one rank"
    if not group_name:
        return "the group has no name yet"
    from .fast_allgather import CopyEngineAllGather, ce_options
    from .topology import exchange_locations, single_nvlink_island

    options = options or ce_options(size)
    ok, why = single_nvlink_island(exchange_locations(store, rank, size, device.index or 0))
    if not ok:
        return why
    try:
        from .symm_buffers import register_group

        symm_name = register_group(group_name, store, rank, size, timeout)
        allgather = CopyEngineAllGather(symm_name, device, rank, size, options, native_issuer)
    except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
        # The peers wait for this rank's plan below: answer "off", so they turn the path off too.
        disagreement(store, rank, size, "ce-plan", "off")
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


def check_same_routes(store: dist.Store, rank: int, size: int, plan: str) -> None:
    """At group creation: a rank whose routing plan (routing.route_plan) differs from rank 0's would
    send some call down another path than its peers (a copy-engine pull or kernel on one rank, NCCL on
    another): both wait for each other for ever. Such a rank raises here instead, naming both plans
    (its exit ends the job). A per-rank environment (SMDDP_ROUTES, SMDDP_NATIVE_BACKEND, SMDDP_LAMPORT*,
    SMDDP_CE_KERNEL_STAGE / SMDDP_NATIVE (who issues the AllGather), SMDDP_DISABLE_FAST_PATHS) or a native
    build that failed on one host is what makes them differ."""
    store.set(f"smddp/route-plan/{rank}", plan)
    if rank == 0:
        return
    reference = store.get("smddp/route-plan/0").decode()
    if reference != plan:
        raise ValueError(f"smddp: rank {rank} would route collectives unlike rank 0 (a hang at the first call "
                         f"they route apart): rank 0 {reference}, rank {rank} {plan}. Set SMDDP_ROUTES, "
                         "SMDDP_NATIVE_BACKEND, SMDDP_LAMPORT, SMDDP_LAMPORT_BYTES, SMDDP_CE_KERNEL_STAGE, "
                         "SMDDP_NATIVE and SMDDP_DISABLE_FAST_PATHS alike on every rank (or see why the native "
                         "backend did not build on this one)")
