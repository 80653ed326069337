"""hybrid_shard_degree -> (replicate, shard, tp) sizes (pure)."""
from __future__ import annotations

import pytest

from smdist_launcher.smp.config import SMPConfig
from smdist_launcher.smp.mesh import MeshLayout, layout_for


@pytest.mark.parametrize("tp, hsd, world, expected", [
    (1, 0, 8, MeshLayout(1, 8, 1)),   # FSDP over everyone
    (1, 1, 8, MeshLayout(8, 1, 1)),   # no sharding (replicate only)
    (1, 2, 8, MeshLayout(4, 2, 1)),   # HSDP: shard over 2, replicate 4
    (2, 0, 8, MeshLayout(1, 4, 2)),   # TP 2, FSDP over the remaining 4
    (4, 1, 8, MeshLayout(2, 1, 4)),
])
def test_layout(tp: int, hsd: int, world: int, expected: MeshLayout) -> None:
    layout = layout_for(SMPConfig(tensor_parallel_degree=tp, hybrid_shard_degree=hsd), world)
    assert layout == expected
    assert layout.dp * layout.tp == world
