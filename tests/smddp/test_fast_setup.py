"""The fast paths' shared set-up for both process-group flavours (CPU, real stores)."""
from __future__ import annotations

import inspect
import threading
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from smdist_launcher.smddp import cuda_path, fast_setup, native_backend


def test_both_group_flavours_set_up_through_one_function() -> None:
    """The Python group and the native backend's helper read no SMDDP_CE_* setting themselves: both
    go through fast_setup.set_up_fast_paths (before, the native helper ignored SMDDP_CE_KERNEL_STAGE)."""
    for setup in (cuda_path.CudaPath._set_up_fast_paths, native_backend.NativeHelper._set_up):
        src = inspect.getsource(setup)
        assert "set_up_fast_paths(" in src, setup.__qualname__
        assert "SMDDP_CE_" not in src and "CopyEngineAllGather(" not in src, setup.__qualname__


def _exchange(values: list[str]) -> list[str | None]:
    """Every rank's verdict, each rank a thread on one real store."""
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=30))
    verdicts: list[str | None] = [None] * len(values)

    def rank(r: int) -> None:
        verdicts[r] = fast_setup.disagreement(store, r, len(values), "ce-plan", values[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(values))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return verdicts


def test_ranks_whose_parts_differ_all_turn_the_fast_path_off() -> None:
    """A rank with 2 parts against one with 3 would meet its peer's barrier of another part: the
    group's copy-engine path must go off on every rank alike (NCCL serves), not on some."""
    assert _exchange(["parts=4 min_part=16", "parts=4 min_part=16"]) == [None, None]
    verdicts = _exchange(["parts=2 min_part=16", "parts=3 min_part=16", "parts=2 min_part=16"])
    assert verdicts[0] is not None and verdicts.count(verdicts[0]) == 3
    assert "rank 1: parts=3" in verdicts[0] and "SMDDP_CE_CHUNKS" in verdicts[0]


def test_switches_turn_the_fast_paths_off_before_any_collective_work(monkeypatch: pytest.MonkeyPatch) -> None:
    store, cpu = dist.HashStore(), torch.device("cpu")
    monkeypatch.setenv("SMDDP_DISABLE_FAST_PATHS", "1")
    assert fast_setup.set_up_fast_paths(store, 0, 2, timedelta(seconds=5), cpu, "g") == "SMDDP_DISABLE_FAST_PATHS=1"
    monkeypatch.delenv("SMDDP_DISABLE_FAST_PATHS")
    assert fast_setup.set_up_fast_paths(store, 0, 1, timedelta(seconds=5), cpu, "g") == "group of one rank"
    assert fast_setup.set_up_fast_paths(store, 0, 2, timedelta(seconds=5), cpu, "") == "the group has no name yet"
