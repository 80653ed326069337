"""SMP v1 rank layout: pipeline (pp), tensor (tp) and data-parallel (dp, rdp) groups.

placement_strategy "cluster" puts a model replica's ranks next to each other (TP innermost, then PP,
data parallel outermost: SMP's "DPT"); "spread" puts data-parallel peers next to each other ("TPD").
As in SMP v1, ``dp`` spans all ranks of the same pipeline stage (tensor-parallel ranks read different
data), and ``rdp`` ("reduced" dp) the ranks that also share the tensor-parallel rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from .. import teardown
from .config import V1Config


@dataclass
class Topology:
    rank: int
    size: int
    pp: int
    tp: int
    rdp: int
    mesh: DeviceMesh
    dp_dims: tuple[str, str] = ("rdp", "tp")

    @property
    def dp(self) -> int:
        return self.rdp * self.tp

    def local(self, dim: str) -> int:
        return self.mesh.get_local_rank(dim)

    def group(self, dim: str | tuple[str, ...]) -> Any:
        if isinstance(dim, tuple):
            names = self.mesh.mesh_dim_names or ()
            ordered = tuple(sorted(dim, key=names.index))  # a mesh slices only in its own dim order
            return self.mesh[ordered]._flatten("_".join(ordered)).get_group()
        return self.mesh[dim].get_group()

    @property
    def pp_rank(self) -> int:
        return self.local("pp")

    @property
    def tp_rank(self) -> int:
        return self.local("tp")

    @property
    def rdp_rank(self) -> int:
        return self.local("rdp")

    @property
    def dp_rank(self) -> int:
        """Rank within the dp group, in the order of that group (it depends on the placement)."""
        outer, inner = self.dp_dims
        return self.local(outer) * self.mesh[inner].size() + self.local(inner)

    @property
    def mp_rank(self) -> int:
        return self.pp_rank * self.tp + self.tp_rank


def build_topology(cfg: V1Config, rank: int, world: int, device_type: str) -> Topology:
    pp, tp = cfg.pipeline_parallel_degree, cfg.tensor_parallel_degree
    rdp = world // (pp * tp)
    if cfg.placement_strategy == "cluster":
        mesh = init_device_mesh(device_type, (rdp, pp, tp), mesh_dim_names=("rdp", "pp", "tp"))
        dp_dims = ("rdp", "tp")
    else:
        mesh = init_device_mesh(device_type, (tp, pp, rdp), mesh_dim_names=("tp", "pp", "rdp"))
        dp_dims = ("tp", "rdp")
    teardown.track_mesh(mesh)
    return Topology(rank=rank, size=world, pp=pp, tp=tp, rdp=rdp, mesh=mesh, dp_dims=dp_dims)
