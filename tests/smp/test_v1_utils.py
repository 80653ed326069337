"""``smdistributed.modelparallel.torch.utils.get_distribution_axis`` for tensors that are not split (the split ones,
DTensors over the tp group, run on 2 ranks in test_v1_state_mod.py)."""
from __future__ import annotations

import torch
from torch import nn

from smdist_launcher.smp.v1.utils import get_distribution_axis


def test_tensors_that_are_not_split_have_no_axis() -> None:
    assert get_distribution_axis(None) is None  # AWS's helpers pass dict.get(index, None)
    assert get_distribution_axis(torch.zeros(3, 4)) is None
    assert get_distribution_axis(nn.Linear(2, 3).weight) is None
    assert get_distribution_axis("not a tensor") is None
