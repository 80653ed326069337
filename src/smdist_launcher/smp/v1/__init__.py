"""SMP v1 API (``import smdistributed.modelparallel.torch as smp`` resolves here) on torch.distributed.

Parameters come from ``mp_parameters`` ($SM_HP_MP_PARAMETERS) or ``smp.init(config)``; under mpirun the
ranks come from OMPI_COMM_WORLD_*. Imports torch only.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

import torch
import torch.distributed as dist

from .. import process_group as _pg
from ..config import raw_parameters
from .checkpoint import load, save
from .comm import (DP_GROUP, MP_GROUP, PP_GROUP, RDP_GROUP, TP_GROUP, WORLD, CommGroup, RankType, allgather,
                   barrier, broadcast, dp_barrier, mp_barrier, recv_from)
from .config import V1Config, check_v1_world, parse_v1
from .model import DistributedModel
from .optimizer import DistributedOptimizer
from .state import reset as _reset_state
from .state import state
from .step import StepOutput, step
from .tensor_parallel import set_tensor_parallelism, tensor_parallelism
from .topology import build_topology

log = logging.getLogger("smdist_launcher.smp.v1")


def init(config: str | Mapping[str, Any] | None = None) -> None:
    """Read mp_parameters, join the process group, build the pp/tp/dp layout."""
    raw, where = raw_parameters(config)
    cfg = parse_v1(raw, where)
    _pg.ensure_initialized()
    world = dist.get_world_size()
    check_v1_world(cfg, world, where)
    _reset_state()
    state.cfg = cfg
    state.topology = build_topology(cfg, dist.get_rank(), world, _pg.device_type())
    if not torch.cuda.is_available():
        _cpu_shims()


def _cpu_shims() -> None:
    """Let v1 scripts' ``torch.cuda.set_device(smp.local_rank())`` pass on CPU-only hosts (no-op there)."""
    if getattr(torch.cuda.set_device, "_smp_cpu_shim", False):
        return

    def set_device(device: Any) -> None:
        return None

    set_device._smp_cpu_shim = True  # type: ignore[attr-defined]
    torch.cuda.set_device = set_device  # type: ignore[assignment]


def is_initialized() -> bool:
    return state.topology is not None


def rank() -> int:
    return state.topo().rank


def size() -> int:
    return state.topo().size


def local_rank() -> int:
    return _pg.local_rank()


def local_size() -> int:
    return _pg.local_size()


def tp_rank() -> int:
    return state.topo().tp_rank


def tp_size() -> int:
    return state.topo().tp


def pp_rank() -> int:
    return state.topo().pp_rank


def pp_size() -> int:
    return state.topo().pp


def dp_rank() -> int:
    return state.topo().dp_rank


def dp_size() -> int:
    return state.topo().dp


def rdp_rank() -> int:
    return state.topo().rdp_rank


def rdp_size() -> int:
    return state.topo().rdp


def mp_rank() -> int:
    return state.topo().mp_rank


def mp_size() -> int:
    return state.topo().pp * state.topo().tp


def get_world_process_group() -> Any:
    return dist.group.WORLD


def get_tp_process_group() -> Any:
    return state.topo().group("tp")


def get_pp_process_group() -> Any:
    return state.topo().group("pp")


def get_dp_process_group() -> Any:
    return state.topo().group(state.topo().dp_dims)


def get_rdp_process_group() -> Any:
    return state.topo().group("rdp")


def get_mp_process_group() -> Any:
    return state.topo().group(("pp", "tp"))


__all__ = ["CommGroup", "DP_GROUP", "DistributedModel", "DistributedOptimizer", "MP_GROUP", "PP_GROUP",
           "RDP_GROUP", "RankType", "StepOutput", "TP_GROUP", "V1Config", "WORLD", "allgather", "barrier",
           "broadcast", "dp_barrier", "dp_rank", "dp_size", "get_dp_process_group", "get_mp_process_group",
           "get_pp_process_group", "get_rdp_process_group", "get_tp_process_group", "get_world_process_group",
           "init", "is_initialized", "load", "local_rank", "local_size", "mp_barrier", "mp_rank", "mp_size",
           "pp_rank", "pp_size", "rank", "rdp_rank", "rdp_size", "recv_from", "save", "set_tensor_parallelism",
           "size", "step", "tensor_parallelism", "tp_rank", "tp_size"]
