"""Pieces of the copy-engine all-gather that run without a GPU."""
from __future__ import annotations

import pytest
import torch

from smdist_launcher.smddp.fast_allgather import (
    MIN_PART,
    PART_ALIGN,
    CopyEngineAllGather,
    default_chunks,
    pipeline_parts,
    stage_copy,
)


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


@pytest.mark.parametrize("nbytes", [1, 1000, PART_ALIGN, 3 * MIN_PART + 8, 64 << 20, (512 << 20) + 2])
@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 8])
def test_pipeline_parts_cover_the_bytes_once_in_aligned_parts(nbytes: int, chunks: int) -> None:
    parts = pipeline_parts(nbytes, chunks)
    assert parts[0][0] == 0 and sum(length for _, length in parts) == nbytes
    assert all(a + n == b for (a, n), (b, _) in zip(parts, parts[1:], strict=False))  # contiguous, in order
    assert 1 <= len(parts) <= chunks
    assert all(start % PART_ALIGN == 0 and length > 0 for start, length in parts)
    assert len(parts) == 1 or all(length >= MIN_PART for _, length in parts[:-1])


def test_pipeline_splits_large_calls_and_keeps_small_ones_whole() -> None:
    assert pipeline_parts(128 << 20, 4) == [(i * (32 << 20), 32 << 20) for i in range(4)]
    assert pipeline_parts(MIN_PART, 4) == [(0, MIN_PART)]  # a barrier per part would cost more than it hides
    assert len(pipeline_parts(32 << 20, 8, min_part=4 << 20)) == 8
    assert pipeline_parts(0, 4) == []


def test_chunks_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured on 2 GPUs: pipelined there by default; other group sizes not (unmeasured)."""
    monkeypatch.delenv("SMDDP_CE_CHUNKS", raising=False)
    assert default_chunks(2) > 1
    assert default_chunks(4) == 1 and default_chunks(8) == 1
    monkeypatch.setenv("SMDDP_CE_CHUNKS", "3")
    assert default_chunks(2) == 3 and default_chunks(4) == 3
    for bad in ("0", "-2", "four", "2.5"):
        monkeypatch.setenv("SMDDP_CE_CHUNKS", bad)
        with pytest.raises(ValueError, match=f"SMDDP_CE_CHUNKS={bad!r}: expected a whole number"):
            default_chunks(2)
