"""Device meshes for SMP v2: (replicate, shard, tp) with TP innermost so TP peers share a host's NVLink."""
from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from . import teardown
from .config import SMPConfig


@dataclass(frozen=True)
class MeshLayout:
    """Sizes of each mesh dimension for a world of ``world_size`` processes."""

    replicate: int
    shard: int
    tp: int

    @property
    def dp(self) -> int:
        return self.replicate * self.shard


def layout_for(cfg: SMPConfig, world_size: int) -> MeshLayout:
    """SMP's hybrid_shard_degree: 0 shards over all data-parallel ranks, 1 only replicates, N shards over N."""
    tp = cfg.tensor_parallel_degree
    dp = world_size // tp
    hsd = cfg.hybrid_shard_degree
    shard = dp if hsd == 0 else hsd
    return MeshLayout(replicate=dp // shard, shard=shard, tp=tp)


def build_mesh(layout: MeshLayout, device_type: str) -> DeviceMesh:
    mesh = init_device_mesh(device_type, (layout.replicate, layout.shard, layout.tp),
                            mesh_dim_names=("replicate", "shard", "tp"))
    teardown.track_mesh(mesh)
    return mesh


def data_parallel_mesh(mesh: DeviceMesh, layout: MeshLayout) -> DeviceMesh:
    """The mesh FSDP2 shards over: 1-D (FSDP) when nothing replicates, 2-D (HSDP) otherwise."""
    if layout.replicate == 1:
        return mesh["shard"]
    return mesh["replicate", "shard"]
