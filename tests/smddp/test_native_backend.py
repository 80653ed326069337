"""The native backend's build-or-fall-back contract and its codes shared with C++ (CPU, no build)."""
from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from smdist_launcher.smddp import native_backend, routing


@pytest.fixture
def fresh_loader(monkeypatch, tmp_path):
    monkeypatch.setattr(native_backend, "_module", None)
    monkeypatch.setattr(native_backend, "_reason", None)
    monkeypatch.setenv("SMDDP_NATIVE_CACHE", str(tmp_path / "cache"))
    return monkeypatch


def test_a_failed_build_falls_back_with_one_clear_message(fresh_loader, caplog) -> None:
    """No working compiler: load() returns None, says why once, and the Python group serves."""
    fresh_loader.setenv("CXX", "/nonexistent/c++")
    with caplog.at_level(logging.WARNING, logger="smdist_launcher.smddp"):
        assert native_backend.load() is None
        assert native_backend.load() is None  # cached decision: no second build, no second message
    reason = native_backend.unavailable_reason()
    assert reason
    messages = [r.getMessage() for r in caplog.records if "native backend unavailable" in r.getMessage()]
    assert len(messages) == 1 and "using the Python process group" in messages[0]


def test_the_backend_can_be_turned_off(fresh_loader) -> None:
    fresh_loader.setenv("SMDDP_NATIVE_BACKEND", "0")
    assert native_backend.load() is None
    assert native_backend.unavailable_reason() == "RuntimeError: SMDDP_NATIVE_BACKEND=0"


def test_without_cuda_the_creator_keeps_the_python_group(fresh_loader) -> None:
    import datetime

    import torch.distributed as dist

    from smdist_launcher.smddp.process_group import SmddpProcessGroup, create_smddp_process_group

    fresh_loader.setattr("torch.cuda.is_available", lambda: False)
    store = dist.HashStore()
    pg = create_smddp_process_group(store, 0, 1, datetime.timedelta(seconds=30))
    try:
        assert isinstance(pg, SmddpProcessGroup)
        assert native_backend.unavailable_reason() is None  # no build was even tried
    finally:
        pg.shutdown()


def test_route_codes_match_the_cpp_enums() -> None:
    """routing.py and smddp_backend.cpp agree on what each code means."""
    src = native_backend.source_path()
    assert src is not None
    text = Path(src).read_text()
    enums = dict(re.findall(r"k(\w+) = (\d+)", text))
    assert {name: int(enums[cpp]) for name, cpp in (("nccl", "Nccl"), ("ce", "Ce"), ("one_shot", "OneShot"),
                                                    ("two_shot", "TwoShot"), ("lamport", "Lamport"))
            } == routing.NATIVE_PATH_CODES
    colls = (("all_reduce", "AllReduce"), ("all_gather", "AllGather"), ("reduce_scatter", "ReduceScatter"),
             ("all_reduce_async", "AllReduceAsync"))
    assert {name: int(enums[cpp]) for name, cpp in colls} == routing.NATIVE_COLL_CODES
    assert int(enums["NumColl"]) == len(routing.NATIVE_COLL_CODES)


def test_native_routes_for_the_cpp_backend() -> None:
    codes = routing.native_route_codes(routing.Router(native=True), 2)
    ar = [(limit, path) for coll, limit, path in codes if coll == routing.NATIVE_COLL_CODES["all_reduce"]]
    assert ar and ar == sorted(ar)
    assert routing.Router(native=True).choose("all_reduce", 2, 8 * routing.KiB) in ("one_shot", "two_shot")
    assert routing.Router().choose("all_reduce", 2, 8 * routing.KiB) == "nccl"  # the Python group: NCCL
    assert routing.native_route_codes(routing.Router(native=True), 3) == []


def test_gpu_model_routes_override_the_default_table() -> None:
    h100 = routing.Router(native=True, gpu="NVIDIA H100 80GB HBM3")
    other = routing.Router(native=True, gpu="NVIDIA H200")
    assert h100.choose("all_gather", 2, 128 * routing.MiB) == "ce"
    assert h100.choose("all_gather", 2, 1 * routing.GiB) == "nccl"  # copy engines lost there on H100
    # pipelined copy engines (2026-11-27): 32 MiB-256 MiB won, 16 MiB and 1 GiB lost
    assert [h100.choose("all_gather", 2, n * routing.MiB) for n in (16, 32, 64, 256, 511, 512)] == \
        ["nccl", "ce", "ce", "ce", "ce", "nccl"]
    assert other.choose("all_gather", 2, 1 * routing.GiB) == "ce"


def test_the_lamport_kernel_is_routed_only_when_built() -> None:
    """Built with nvcc: 2- and 4-GPU AllReduce go to smddp's own kernel where it measured faster; without it,
    torch's kernels (2 GPUs) or NCCL."""
    with_kernel = routing.Router(native=True, lamport=True)
    without = routing.Router(native=True, lamport=False)
    assert with_kernel.choose("all_reduce", 2, 8 * routing.KiB) == "lamport"
    assert with_kernel.choose("all_reduce", 2, 1 * routing.GiB) == "nccl"
    assert without.choose("all_reduce", 2, 8 * routing.KiB) in ("one_shot", "two_shot")
    assert routing.Router(lamport=True).choose("all_reduce", 2, 8 * routing.KiB) == "nccl"  # the Python group
    assert with_kernel.choose("all_reduce", 4, 512 * routing.KiB) == "lamport"
    assert with_kernel.choose("all_reduce", 4, 1 * routing.MiB) == "nccl"  # 4 GPUs: mixed from 1 MiB
    assert with_kernel.choose("all_reduce", 8, 8 * routing.KiB) == "nccl"  # 8 GPUs: not measured


def test_lamport_buffer_size_follows_the_routes(monkeypatch) -> None:
    monkeypatch.delenv("SMDDP_LAMPORT_BYTES", raising=False)
    router = routing.Router(native=True, lamport=True)
    largest = max(limit for limit, path in router.table[("all_reduce", 2)] if path == "lamport")
    assert native_backend.lamport_region_bytes(router, 2) == -(-largest // 16) * 16
    assert native_backend.lamport_region_bytes(router, 4) == 512 * routing.KiB
    assert native_backend.lamport_region_bytes(router, 8) == 0  # no Lamport route: no buffer
    assert native_backend.lamport_region_bytes(routing.Router(native=True), 2) == 0
    monkeypatch.setenv("SMDDP_LAMPORT_BYTES", "1000")
    assert native_backend.lamport_region_bytes(router, 4) == 1008  # forced calls on any size up to 8 ranks
    assert native_backend.lamport_region_bytes(router, 16) == 0
    monkeypatch.setenv("SMDDP_LAMPORT_BYTES", "4MB")
    with pytest.raises(ValueError, match="SMDDP_LAMPORT_BYTES='4MB'"):
        native_backend.lamport_region_bytes(router, 2)
    # -1 silently turned the kernel off; 2**62 asked for a 2**64-byte buffer at the first call
    for bad in ("-1", str(1 << 62), str(routing.LAMPORT_MAX_LIMIT + 1), "1_000"):
        monkeypatch.setenv("SMDDP_LAMPORT_BYTES", bad)
        with pytest.raises(ValueError, match=f"SMDDP_LAMPORT_BYTES='{bad}': expected a number of bytes from 0"):
            native_backend.lamport_region_bytes(router, 2)
    monkeypatch.setenv("SMDDP_LAMPORT_BYTES", str(routing.LAMPORT_MAX_LIMIT))
    assert native_backend.lamport_region_bytes(router, 2) == routing.LAMPORT_MAX_LIMIT


def test_async_allreduce_routes_reach_cpp_and_size_the_lamport_buffer(monkeypatch) -> None:
    """An ``all_reduce_async`` route (DDP's buckets) is handed to C++ under its own code, and a Lamport
    entry there sizes the buffer even where synchronous calls stop at a smaller size."""
    monkeypatch.delenv("SMDDP_LAMPORT_BYTES", raising=False)
    table = {("all_reduce", 2): [(16 * routing.MiB, "lamport")],
             ("all_reduce_async", 2): [(32 * routing.MiB, "lamport")]}
    router = routing.Router(table=table, native=True, lamport=True)
    codes = routing.native_route_codes(router, 2)
    assert (routing.NATIVE_COLL_CODES["all_reduce_async"], 32 * routing.MiB, routing.NATIVE_PATH_CODES["lamport"]) \
        in codes
    assert native_backend.lamport_region_bytes(router, 2) == 32 * routing.MiB


def test_the_extension_name_covers_both_sources_and_the_flag() -> None:
    src = native_backend.source_path()
    kernel = native_backend.native_source(native_backend.KERNEL_NAME)
    assert src is not None and kernel is not None
    with_kernel = native_backend.build_plan(src, kernel)
    without = native_backend.build_plan(src, None)
    assert with_kernel[0] != without[0]
    assert "-DSMDDP_LAMPORT" in with_kernel[2] and "-DSMDDP_LAMPORT" not in without[2]
    assert with_kernel[1] == [str(src), str(kernel)]


def test_a_failed_kernel_build_still_gives_the_backend(fresh_loader, caplog) -> None:
    """nvcc missing or failing: the backend is built from the C++ source alone, with one warning."""
    built: list[Path | None] = []

    def fake_build(src: Path, kernel: Path | None) -> object:
        built.append(kernel)
        if kernel is not None:
            raise OSError("nvcc: not found")
        return "cpp-only module"

    fresh_loader.setattr(native_backend, "_build", fake_build)
    with caplog.at_level(logging.WARNING, logger="smdist_launcher.smddp"):
        assert native_backend.load() == "cpp-only module"
    assert built[0] is not None and built[1] is None
    assert native_backend.unavailable_reason() is None
    assert any("Lamport AllReduce kernel did not build" in r.getMessage() and "nvcc: not found" in r.getMessage()
               for r in caplog.records)


def test_the_lamport_kernel_can_be_left_out(fresh_loader) -> None:
    built: list[Path | None] = []
    fresh_loader.setenv("SMDDP_LAMPORT", "0")
    fresh_loader.setattr(native_backend, "_build", lambda src, kernel: built.append(kernel) or "module")
    assert native_backend.load() == "module" and built == [None]


def test_lamport_rank_limit_matches_the_kernel() -> None:
    kernel = native_backend.native_source(native_backend.KERNEL_NAME)
    assert kernel is not None
    match = re.search(r"constexpr int kMaxRanks = (\d+);", kernel.read_text())
    assert match and int(match.group(1)) == native_backend.LAMPORT_MAX_RANKS


def test_lamport_timeout_setting_is_checked(monkeypatch) -> None:
    """SMDDP_LAMPORT_TIMEOUT_S: seconds above 0 (0 would stop the context at the first wait for a
    peer); a bad value names the variable, its value and what is allowed."""
    from datetime import timedelta

    monkeypatch.delenv("SMDDP_LAMPORT_TIMEOUT_S", raising=False)
    assert native_backend.lamport_timeout_s(timedelta(minutes=10)) == 600.0
    assert native_backend.lamport_timeout_s(timedelta(days=365)) == native_backend.LAMPORT_TIMEOUT_MAX_S
    monkeypatch.setenv("SMDDP_LAMPORT_TIMEOUT_S", "2.5")
    assert native_backend.lamport_timeout_s(timedelta(minutes=10)) == 2.5
    for bad in ("0", "-1", "30s", "nan", "inf", "1e30"):
        monkeypatch.setenv("SMDDP_LAMPORT_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match=re.escape(f"SMDDP_LAMPORT_TIMEOUT_S={bad!r}: expected seconds")):
            native_backend.lamport_timeout_s(timedelta(minutes=10))
