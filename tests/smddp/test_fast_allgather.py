"""Pieces of the copy-engine all-gather that run without a GPU."""
from __future__ import annotations

import pytest
import torch

from smdist_launcher.smddp.fast_allgather import (
    MIN_PART,
    PART_ALIGN,
    CeOptions,
    CopyEngineAllGather,
    ce_options,
    default_chunks,
    pipeline_parts,
    stage_copy,
)

CE_KEYS = ("SMDDP_CE_SERIAL", "SMDDP_CE_SPLITS", "SMDDP_CE_KERNEL_STAGE", "SMDDP_CE_CHUNKS")


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


@pytest.fixture
def ce_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in CE_KEYS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_every_copy_engine_setting_is_read_in_one_place(ce_env: pytest.MonkeyPatch) -> None:
    assert ce_options(2) == CeOptions(serial=False, splits=1, kernel_stage=False, chunks=4)
    assert ce_options(4) == CeOptions(serial=True, splits=1, kernel_stage=False, chunks=1)
    for key, value in (("SMDDP_CE_SERIAL", "1"), ("SMDDP_CE_SPLITS", "3"), ("SMDDP_CE_KERNEL_STAGE", "1"),
                       ("SMDDP_CE_CHUNKS", "2")):
        ce_env.setenv(key, value)
    assert ce_options(2) == CeOptions(serial=True, splits=3, kernel_stage=True, chunks=2)


@pytest.mark.parametrize(("key", "value"), [
    ("SMDDP_CE_SPLITS", "0"), ("SMDDP_CE_SPLITS", "two"), ("SMDDP_CE_SERIAL", "yes"),
    ("SMDDP_CE_KERNEL_STAGE", "true"), ("SMDDP_CE_CHUNKS", "-1"), ("SMDDP_CE_CHUNKS", "9" * 5000),
    ("SMDDP_CE_CHUNKS", "1e3"),
])
def test_a_bad_setting_names_the_variable_and_the_value(ce_env: pytest.MonkeyPatch, key: str, value: str) -> None:
    ce_env.setenv(key, value)
    with pytest.raises(ValueError, match=f"{key}='{value[:20]}.*expected"):
        ce_options(2)


def test_a_huge_parts_setting_is_bounded_by_the_size(ce_env: pytest.MonkeyPatch) -> None:
    ce_env.setenv("SMDDP_CE_CHUNKS", "1000000")
    chunks = ce_options(2).chunks
    for nbytes in (1, 3 * MIN_PART - 1, 4 * MIN_PART + 12345):
        parts = pipeline_parts(nbytes, chunks)
        assert 1 <= len(parts) <= max(1, nbytes // MIN_PART)
        assert sum(n for _, n in parts) == nbytes


def test_an_input_overlapping_the_output_is_eligible_only_as_its_own_chunk() -> None:
    """FSDP2 gathers in place (the input is the output's rank chunk): eligible, and the own-chunk copy
    is skipped. An input overlapping another chunk would be overwritten by a pull before it is
    staged: NCCL serves it (undefined there too, but not made worse)."""
    out = torch.empty(24)
    assert CopyEngineAllGather.eligible(out, out[12:18], 4, rank=2)
    assert not CopyEngineAllGather.eligible(out, out[12:18], 4, rank=1)
    assert not CopyEngineAllGather.eligible(out, out[12:18], 4)  # rank unknown
    assert not CopyEngineAllGather.eligible(out, out[3:9], 4, rank=0)  # straddles two chunks
    assert CopyEngineAllGather.eligible(out, torch.empty(6), 4, rank=1)
    both = torch.empty(30)
    assert CopyEngineAllGather.eligible(both[:24], both[24:], 4, rank=0)  # adjacent, apart
    assert CopyEngineAllGather.eligible(both[6:], both[:6], 4, rank=0)  # adjacent on the other side
    assert not CopyEngineAllGather.eligible(both[6:], both[5:11], 4, rank=0)  # one element into chunk 0
