"""Pieces of the copy-engine all-gather that run without a GPU."""
from __future__ import annotations

import pytest
import torch

from smdist_launcher.smddp.fast_allgather import CopyEngineAllGather, stage_copy


@pytest.mark.parametrize("n", [1, 3, 8, 13, 4096, 1001])
@pytest.mark.parametrize("offset", [0, 1, 4])
@pytest.mark.parametrize("kernel", [True, False])
def test_stage_copy_is_bit_exact_for_any_size_and_alignment(n: int, offset: int, kernel: bool) -> None:
    gen = torch.Generator().manual_seed(n * 10 + offset)
    src = torch.randint(0, 256, (n + offset,), dtype=torch.uint8, generator=gen)[offset:]
    dst = torch.full((n,), 0xAB, dtype=torch.uint8)
    stage_copy(dst, src, kernel)
    assert torch.equal(dst, src)


def test_eligibility_needs_contiguous_same_dtype_and_world_times_input() -> None:
    inp = torch.empty(6)
    assert CopyEngineAllGather.eligible(torch.empty(24), inp, 4)
    assert not CopyEngineAllGather.eligible(torch.empty(23), inp, 4)
    assert not CopyEngineAllGather.eligible(torch.empty(24, dtype=torch.bfloat16), inp, 4)
    assert not CopyEngineAllGather.eligible(torch.empty(48)[::2], inp, 4)
