"""The symmetric-memory group helper across process-group lifetimes (CPU: gloo, one rank)."""
from __future__ import annotations

import torch.distributed as dist
from torch._C._distributed_c10d import _resolve_process_group

from smdist_launcher.smddp.symm_buffers import register_group


def test_a_second_init_in_the_same_process_gets_a_live_group() -> None:
    """destroy_process_group() unregisters every group and the next init reuses the names ("0"):
    the helper registered in the first run must not be handed out again (it resolves to nothing)."""
    assert not dist.is_initialized()
    names = []
    for _ in range(2):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            group_name = dist.group.WORLD.group_name
            name = register_group(group_name, dist.HashStore(), 0, 1)
            assert register_group(group_name, dist.HashStore(), 0, 1) == name  # same run: set up once
            assert _resolve_process_group(name).size() == 1  # raises when the name is stale
            names.append((group_name, name))
        finally:
            dist.destroy_process_group()
    (first_group, first), (second_group, second) = names
    assert first_group == second_group and first != second
