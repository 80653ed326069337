"""``torch.sagemaker.utils.process_group_utils``: global ranks of a process group."""
from __future__ import annotations

from typing import Any

import torch.distributed as dist


def get_global_ranks(process_group: Any = None) -> list[int]:
    """Global ranks in ``process_group`` (the world when None), in group-rank order."""
    if process_group is None or process_group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(process_group))


def get_group_rank(process_group: Any, global_rank: int) -> int:
    return get_global_ranks(process_group).index(global_rank)
