"""SMP v1 API (``import smdistributed.modelparallel.torch as smp`` resolves here) on torch.distributed.

Parameters come from ``mp_parameters`` ($SM_HP_MP_PARAMETERS) or ``smp.init(config)``; under mpirun the
ranks come from OMPI_COMM_WORLD_*. Imports torch only.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from ...compat import SMP_V1_VERSION as __version__  # noqa: F401 - re-exported as smp.__version__
from .. import process_group as _pg
from ..config import raw_parameters
from . import amp, nn, optimizers, patches
from .activation_checkpointing import set_activation_checkpointing
from .checkpoint import load, save
from .checkpoint_files import resume_from_checkpoint, save_checkpoint
from .comm import (
    DP_GROUP,
    DP_RANK,
    MP_GROUP,
    MP_RANK,
    PP_GROUP,
    PP_RANK,
    RDP_GROUP,
    RDP_RANK,
    TP_GROUP,
    TP_RANK,
    WORLD,
    WORLD_RANK,
    CommGroup,
    RankType,
    allgather,
    barrier,
    broadcast,
    dp_barrier,
    group_ranks,
    mp_barrier,
    recv_from,
    send,
)
from .config import V1Config, check_v1_world, parse_v1
from .model import DistributedModel
from .model_creation import delay_param_initialization, model_creation
from .notices import warn_once as _warn_once
from .optimizer import DistributedOptimizer
from .partition import partition, set_partition
from .state import reset as _reset_state, state
from .step import StepOutput, step
from .tensor_parallel import set_tensor_parallelism, tensor_parallelism, tp_register, tp_register_with_module
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
    _sharding_notice(cfg)
    if not torch.cuda.is_available():
        _cpu_shims()


def _sharding_notice(cfg: V1Config) -> None:
    if cfg.sharded_data_parallel_degree > 1:
        _warn_once("sdp", f"sharded_data_parallel_degree={cfg.sharded_data_parallel_degree}: parameters, gradients "
                   "and optimizer states are not sharded here; every data-parallel rank keeps a full replica and "
                   "gradients are averaged over the data-parallel group (same training math, more memory). For "
                   "sharding use SMP v2 (torch.sagemaker, hybrid_shard_degree)")


def _cpu_shims() -> None:
    """Let v1 scripts' ``torch.cuda.set_device(smp.local_rank())`` pass on CPU-only hosts (no-op there)."""
    if getattr(torch.cuda.set_device, "_smp_cpu_shim", False):
        return

    def set_device(device: Any) -> None:
        return None

    set_device._smp_cpu_shim = True  # type: ignore[attr-defined]
    torch.cuda.set_device = set_device


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


def is_tracing() -> bool:
    """SMP traced the model on its first step to partition it; here partitioning needs no separate tracing run."""
    return False


def _ranks(group: CommGroup) -> list[int]:
    return group_ranks(group)


def get_world_group() -> list[int]:
    return list(range(size()))


def get_mp_group() -> list[int]:
    """Global ranks holding the parts of this process's model replica."""
    return _ranks(CommGroup.MP_GROUP)


def get_dp_group() -> list[int]:
    """Global ranks holding replicas of this process's model partition."""
    return _ranks(CommGroup.DP_GROUP)


def get_tp_group() -> list[int]:
    return _ranks(CommGroup.TP_GROUP)


def get_pp_group() -> list[int]:
    return _ranks(CommGroup.PP_GROUP)


def get_rdp_group() -> list[int]:
    return _ranks(CommGroup.RDP_GROUP)


__all__ = ["CommGroup", "DP_GROUP", "DistributedModel", "DistributedOptimizer", "MP_GROUP", "PP_GROUP",
           "RDP_GROUP", "RankType", "StepOutput", "TP_GROUP", "V1Config", "WORLD", "allgather", "barrier",
           "broadcast", "dp_barrier", "dp_rank", "dp_size", "get_dp_process_group", "get_mp_process_group",
           "get_pp_process_group", "get_rdp_process_group", "get_tp_process_group", "get_world_process_group",
           "init", "is_initialized", "load", "local_rank", "local_size", "mp_barrier", "mp_rank", "mp_size",
           "pp_rank", "pp_size", "rank", "rdp_rank", "rdp_size", "recv_from", "save", "set_tensor_parallelism",
           "size", "step", "tensor_parallelism", "tp_rank", "tp_size",
           "DP_RANK", "MP_RANK", "PP_RANK", "RDP_RANK", "TP_RANK", "WORLD_RANK", "amp", "delay_param_initialization",
           "get_dp_group", "get_mp_group", "get_pp_group", "get_rdp_group", "get_tp_group", "get_world_group",
           "is_tracing", "model_creation", "nn", "optimizers", "partition", "patches", "resume_from_checkpoint",
           "save_checkpoint", "send", "set_activation_checkpointing", "set_partition", "tp_register",
           "tp_register_with_module"]
