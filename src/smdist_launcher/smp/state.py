"""``tsm.state``: ranks, degrees, process groups and device meshes of the current SMP v2 job."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.distributed.device_mesh import DeviceMesh

from . import process_group
from .config import SMPConfig
from .mesh import MeshLayout, build_mesh


@dataclass
class SMPState:
    """Filled by ``tsm.init``; attribute names follow SMP v2 (``tp_size``, ``rep_rank_process_group``...)."""

    initialized: bool = False
    cfg: SMPConfig = field(default_factory=SMPConfig)
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    layout: MeshLayout | None = None
    device_mesh: DeviceMesh | None = None
    # None where SMP also gives None (fallback to native PyTorch before init)
    world_process_group: Any = None

    # --- degrees -------------------------------------------------------------------------
    @property
    def hybrid_shard_degree(self) -> int:
        return self.cfg.hybrid_shard_degree

    @property
    def tensor_parallel_degree(self) -> int:
        return self.cfg.tensor_parallel_degree

    @property
    def context_parallel_degree(self) -> int:
        return self.cfg.context_parallel_degree

    @property
    def expert_parallel_degree(self) -> int:
        return self.cfg.expert_parallel_degree

    @property
    def sm_activation_offloading(self) -> bool:
        """Scripts test this before wrapping the model in PyTorch's offload_wrapper (SMP then prefetches)."""
        return self.cfg.sm_activation_offloading

    @property
    def activation_loading_horizon(self) -> int:
        return self.cfg.activation_loading_horizon

    @property
    def ranker(self) -> Ranker:
        """Coordinates of any global rank in the (replicate, shard, tp) layout."""
        return Ranker(self.layout or MeshLayout(replicate=1, shard=self.world_size, tp=1))

    tp_size = tensor_parallel_degree
    cp_size = context_parallel_degree
    ep_size = expert_parallel_degree

    # --- meshes --------------------------------------------------------------------------
    def _need(self) -> DeviceMesh:
        if self.device_mesh is None:
            raise RuntimeError("smp: call tsm.init() before using tsm.state's meshes and groups")
        return self.device_mesh

    @property
    def tp_mesh(self) -> DeviceMesh:
        return self._need()["tp"]

    @property
    def dp_mesh(self) -> DeviceMesh:
        """What fully_shard takes: 1-D for FSDP, 2-D (replicate, shard) for HSDP."""
        from .mesh import data_parallel_mesh
        assert self.layout is not None
        return data_parallel_mesh(self._need(), self.layout)

    @property
    def tp_rank(self) -> int:
        return self.tp_mesh.get_local_rank() if self.device_mesh is not None else 0

    @property
    def tp_process_group(self) -> Any:
        return self.tp_mesh.get_group() if self.device_mesh is not None else None

    @property
    def dp_size(self) -> int:
        return self.layout.dp if self.layout else self.world_size

    @property
    def dp_rank(self) -> int:
        if self.device_mesh is None:
            return self.rank
        m = self._need()
        return m["replicate"].get_local_rank() * m["shard"].size() + m["shard"].get_local_rank()

    @property
    def dp_flat_mesh(self) -> DeviceMesh:
        """All data-parallel ranks of this TP rank as one 1-D mesh."""
        m = self._need()
        assert self.layout is not None
        if self.layout.replicate == 1:
            return m["shard"]
        if self.layout.shard == 1:
            return m["replicate"]
        return m["replicate", "shard"]._flatten("dp")

    @property
    def rep_rank_process_group(self) -> Any:
        """Ranks that hold the same tensor-parallel shard (the data-parallel group)."""
        if self.device_mesh is None:
            return None
        return self.dp_flat_mesh.get_group()

    @property
    def shard_process_group(self) -> Any:
        return self._need()["shard"].get_group() if self.device_mesh is not None else None

    @property
    def replicate_process_group(self) -> Any:
        return self._need()["replicate"].get_group() if self.device_mesh is not None else None

    # Context/expert parallelism are accepted in the config but not implemented (size 1).
    cp_rank: int = 0
    ep_rank: int = 0
    cp_process_group: Any = None

    def describe(self) -> dict[str, Any]:
        return {"rank": self.rank, "world_size": self.world_size, "tp_size": self.tp_size, "tp_rank": self.tp_rank,
                "dp_size": self.dp_size, "dp_rank": self.dp_rank,
                "layout": None if self.layout is None else vars(self.layout), "config": self.cfg.to_dict()}


@dataclass(frozen=True)
class Ranker:
    """Global rank <-> (replicate, shard, tp) coordinates; ranks are laid out row-major, TP innermost."""

    layout: MeshLayout

    def _coords(self, rank: int | None) -> tuple[int, int, int]:
        r = state.rank if rank is None else rank
        tp, shard = self.layout.tp, self.layout.shard
        return r // (shard * tp), (r // tp) % shard, r % tp

    def get_rep_rank(self, rank: int | None = None) -> int:
        """Which replica of the sharded model ``rank`` belongs to (0: the ranks that write sharded checkpoints)."""
        return self._coords(rank)[0]

    def get_shard_rank(self, rank: int | None = None) -> int:
        return self._coords(rank)[1]

    def get_tp_rank(self, rank: int | None = None) -> int:
        return self._coords(rank)[2]

    def get_dp_rank(self, rank: int | None = None) -> int:
        rep, shard, _ = self._coords(rank)
        return rep * self.layout.shard + shard

    def get_rank(self, rep_rank: int = 0, shard_rank: int = 0, tp_rank: int = 0) -> int:
        return (rep_rank * self.layout.shard + shard_rank) * self.layout.tp + tp_rank

    def get_rep_groups(self) -> list[list[int]]:
        """The replication groups: the ranks that hold the same shard (same shard and TP coordinates), one list
        per shard; SMP's local checkpoints save and load within one such group."""
        return [[self.get_rank(rep, shard, tp) for rep in range(self.layout.replicate)]
                for shard in range(self.layout.shard) for tp in range(self.layout.tp)]


state = SMPState()


def reset_state() -> None:
    """For tests that init several times in one process."""
    global state
    fresh = SMPState()
    state.__dict__.update(fresh.__dict__)


def relayout(shard: int) -> None:
    """Rebuild tsm.state's mesh with ``shard`` ranks per shard group (FSDP's HYBRID_SHARD with
    hybrid_shard_degree 0 shards within a host). Collective: every rank calls it at the same point."""
    layout = state.layout
    assert layout is not None
    new = MeshLayout(replicate=layout.dp // shard, shard=shard, tp=layout.tp)
    state.layout = new
    state.device_mesh = build_mesh(new, process_group.device_type())
