"""Pieces of the copy-engine all-gather that run without a GPU."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from smdist_launcher.smddp.fast_allgather import (
    MAX_SPLITS,
    MIN_PART,
    PART_ALIGN,
    CeOptions,
    CopyEngineAllGather,
    PartPlans,
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


@pytest.mark.parametrize(("out_len", "in_slice"), [
    (24, slice(12, 18)),  # chunk 2: in place on rank 2 only
    (24, slice(3, 9)),  # straddles two chunks
    (30, slice(24, 30)),  # adjacent to the output, apart
    (30, slice(5, 11)),  # one element into chunk 0 of an output at offset 6
])
def test_eligibility_is_the_same_on_every_rank_wherever_the_input_sits(out_len: int, in_slice: slice) -> None:
    """Where a tensor sits is rank-local: when every rank passes the output's chunk 2 as input, rank 2
    is in place and the others overlap. Deciding the path on that sent rank 2 to the copy engines and
    its peers to NCCL (a hang: each waits for the other's collective). The path is now the same on
    every rank; an overlapping input is copied aside in the call instead."""
    base = torch.arange(float(out_len))  # values, not torch.empty's leftovers: a NaN there is never equal to itself
    out = base[:24] if out_len == 24 or in_slice.start >= 24 else base[6:30]
    inp = base[in_slice]
    assert CopyEngineAllGather.eligible(out, inp, 4)  # no rank, no address: one verdict for every rank
    for rank in range(4):
        private = CopyEngineAllGather.private_input(out, inp, rank)
        assert torch.equal(private, inp)
        own_chunk = inp.data_ptr() == out.data_ptr() + rank * inp.numel() * inp.element_size()
        apart = in_slice.start >= 24
        assert (private is inp) == (own_chunk or apart), rank


def test_an_overlapping_input_is_copied_aside_and_an_in_place_one_is_not() -> None:
    out = torch.arange(24.0)
    assert CopyEngineAllGather.private_input(out, out[12:18], 2).data_ptr() == out[12:18].data_ptr()  # FSDP2
    aside = CopyEngineAllGather.private_input(out, out[12:18], 1)
    assert aside.data_ptr() != out[12:18].data_ptr() and torch.equal(aside, out[12:18])
    other = torch.empty(6)
    assert CopyEngineAllGather.private_input(out, other, 1) is other
    assert CopyEngineAllGather.private_input(out, torch.empty(0), 0).numel() == 0


@pytest.mark.parametrize("value", ["17", "1000000000000", "1_0", "+4", "\u0664", "99999999999999999999"])
def test_splits_are_bounded_and_numbers_are_plain_digits(ce_env: pytest.MonkeyPatch, value: str) -> None:
    """SMDDP_CE_SPLITS=10**12 made (world-1) x 10**12 side streams at the first call (and overflowed the
    C int it is passed as); "1_0", "+4" and non-ASCII digits were read by int()."""
    ce_env.setenv("SMDDP_CE_SPLITS", value)
    with pytest.raises(ValueError, match=r"SMDDP_CE_SPLITS=.*expected a whole number"):
        ce_options(2)
    ce_env.delenv("SMDDP_CE_SPLITS")
    if value not in ("17", "1000000000000"):
        ce_env.setenv("SMDDP_CE_CHUNKS", value)
        with pytest.raises(ValueError, match=r"SMDDP_CE_CHUNKS=.*expected a whole number"):
            ce_options(2)


def test_settings_with_surrounding_whitespace_are_read(ce_env: pytest.MonkeyPatch) -> None:
    ce_env.setenv("SMDDP_CE_SPLITS", f" {MAX_SPLITS}\n")
    ce_env.setenv("SMDDP_CE_CHUNKS", "\t2 ")
    ce_env.setenv("SMDDP_CE_SERIAL", " 0 ")
    assert ce_options(4) == CeOptions(serial=False, splits=MAX_SPLITS, kernel_stage=False, chunks=2)


@settings(max_examples=200, deadline=None)
@given(nbytes=st.integers(0, 1 << 44), chunks=st.integers(-3, 1 << 20),
       min_part=st.one_of(st.just(MIN_PART), st.integers(-1, 1 << 30)))
def test_pipeline_parts_properties(nbytes: int, chunks: int, min_part: int) -> None:
    """Every rank derives its barriers from these parts: they cover [0, nbytes) exactly once, in order,
    start on PART_ALIGN, never exceed ``chunks`` (at least one), and depend on nothing else."""
    parts = pipeline_parts(nbytes, chunks, min_part)
    assert parts == pipeline_parts(nbytes, chunks, min_part)
    if nbytes == 0:
        assert parts == []
        return
    assert parts[0][0] == 0 and parts[-1][0] + parts[-1][1] == nbytes
    assert all(a + n == b for (a, n), (b, _) in zip(parts, parts[1:], strict=False))
    assert all(length > 0 and start % PART_ALIGN == 0 for start, length in parts)
    assert 1 <= len(parts) <= max(1, min(chunks, nbytes // max(min_part, 1)))


def test_parts_are_planned_once_per_size_and_again_when_they_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeated call plans nothing (the parts of a size are cached); changing ``chunks`` or ``min_part``
    (every rank alike: benchmarks, tests) re-plans, and moves ``version``, the counter the native backend
    reads without the GIL to drop its own cached parts."""
    from smdist_launcher.smddp import fast_allgather

    planned: list[int] = []
    real = fast_allgather.pipeline_parts
    monkeypatch.setattr(fast_allgather, "pipeline_parts", lambda n, c, m=MIN_PART: planned.append(n) or real(n, c, m))
    plans = PartPlans(4)
    held = plans.version  # the C++ side keeps this very tensor
    first = plans.parts(128 << 20)
    assert first == tuple(real(128 << 20, 4)) and len(first) == 4
    assert plans.parts(128 << 20) is first and planned == [128 << 20]
    plans.parts(64 << 20)
    assert planned == [128 << 20, 64 << 20] and int(held) == 0
    plans.chunks = 2
    assert int(held) == 1 and plans.version is held
    assert plans.parts(128 << 20) == tuple(real(128 << 20, 2)) and len(planned) == 3
    plans.min_part = 1 << 16
    assert int(held) == 2 and plans.parts(1 << 20) == tuple(real(1 << 20, 2, 1 << 16))
    assert plans.barrier_plan() == "parts=2 min_part=65536"


def test_the_python_choreography_plans_one_part_whatever_the_setting() -> None:
    """Without native code issuing the calls the copies go out in one part: its barrier plan says so, so
    that a rank issuing natively (parts) and one from Python (one part) turn the fast path off."""
    plans = PartPlans(4, pipelined=False)
    assert plans.parts(128 << 20) == ((0, 128 << 20),)
    assert plans.barrier_plan() == f"parts=1 min_part={MIN_PART}"
    assert PartPlans(4).barrier_plan() == f"parts=4 min_part={MIN_PART}"
    assert plans.parts(0) == ()


def test_the_plan_cache_is_bounded() -> None:
    plans = PartPlans(4)
    for n in range(1, PartPlans.MAX_SIZES + 10):
        plans.parts(n * PART_ALIGN)
    assert len(plans._cache) <= PartPlans.MAX_SIZES
