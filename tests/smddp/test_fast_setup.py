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


def _set_up_on_threads(size: int, **kwargs: object) -> list[object]:
    """Every rank's set_up_fast_paths result (or exception), each rank a thread on one real store."""
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=10))  # a rank left waiting fails the test instead of hanging it
    results: list[object] = [None] * size

    def rank(r: int) -> None:
        try:
            results[r] = fast_setup.set_up_fast_paths(store, r, size, timedelta(seconds=10), torch.device("cpu"), "g",
                                                      **kwargs)
        except Exception as exc:  # noqa: BLE001  reported per rank below
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_settings_read_at_init_are_the_ones_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """SMDDP_CE_* are read and checked once, at init_process_group: a value changed afterwards (here made
    invalid) cannot raise in the collective set-up on one rank while its peers wait for it."""
    from smdist_launcher.smddp.fast_allgather import ce_options

    monkeypatch.delenv("SMDDP_CE_CHUNKS", raising=False)
    options = ce_options(2)
    monkeypatch.setenv("SMDDP_CE_CHUNKS", "0")
    # Both threads sit on CPU "device 0": the set-up gets past the settings to the topology check.
    assert _set_up_on_threads(2, options=options) == ["two ranks share one GPU"] * 2


class _HalfWorkingAllGather:
    """The copy-engine AllGather's constructor as on a GPU where rank 1 cannot set it up."""

    def __init__(self, symm_name: str, device: torch.device, rank: int, size: int, options: object,
                 native_issuer: bool = False) -> None:
        if rank == 1:
            raise RuntimeError("CUDA out of memory")

    def barrier_plan(self) -> str:
        return "parts=1 min_part=16"


def test_a_rank_whose_set_up_fails_still_answers_its_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 1 failed to set up and returned; rank 0 then waited for rank 1's plan forever (store timeout).
    Now rank 1 answers "off" and every rank turns the fast path off."""
    from smdist_launcher.smddp import fast_allgather, symm_buffers, topology

    monkeypatch.setattr(topology, "single_nvlink_island", lambda locations: (True, ""))
    monkeypatch.setattr(symm_buffers, "register_group", lambda name, *args: f"{name}/symm")
    monkeypatch.setattr(fast_allgather, "CopyEngineAllGather", _HalfWorkingAllGather)
    results = _set_up_on_threads(3)
    assert all(isinstance(r, str) for r in results), results
    assert "rank 1: off" in str(results[0]) and results[0] == results[2]
    assert "CUDA out of memory" in str(results[1])


def _check_on_threads(plans: list[str]) -> list[object]:
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=10))
    results: list[object] = [None] * len(plans)

    def rank(r: int) -> None:
        try:
            fast_setup.check_same_routes(store, r, len(plans), plans[r])
        except ValueError as exc:
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_a_rank_routing_unlike_rank_0_fails_at_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """SMDDP_ROUTES (or SMDDP_DISABLE_FAST_PATHS, SMDDP_LAMPORT_BYTES, the group flavour after a failed
    native build) set differently on one rank sent one call to the copy engines there and to NCCL on its
    peers: a hang at that call. The rank that differs now fails at init_process_group, naming both plans."""
    from smdist_launcher.smddp import routing

    monkeypatch.delenv("SMDDP_ROUTES", raising=False)
    monkeypatch.delenv("SMDDP_DISABLE_FAST_PATHS", raising=False)
    same = routing.route_plan(routing.Router(native=True), 2, "native", 4096)
    monkeypatch.setenv("SMDDP_ROUTES", '{"all_gather/2": [[1024, "nccl"], [4611686018427387904, "ce"]]}')
    routed = routing.route_plan(routing.Router(native=True), 2, "native", 4096)
    monkeypatch.delenv("SMDDP_ROUTES")
    assert routing.route_plan(routing.Router(native=True), 4, "native", 4096) == \
        routing.route_plan(routing.Router(native=True), 4, "native", 4096)
    assert same != routed  # an override for another group size would not count
    monkeypatch.setenv("SMDDP_DISABLE_FAST_PATHS", "1")
    disabled = routing.route_plan(routing.Router(native=True), 2, "native", 4096)
    monkeypatch.delenv("SMDDP_DISABLE_FAST_PATHS")
    python = routing.route_plan(routing.Router(), 2, "python")
    assert len({same, routed, disabled, python, routing.route_plan(routing.Router(native=True), 2, "native", 0)}) == 5

    assert _check_on_threads([same, same, same]) == [None, None, None]
    for odd in (routed, disabled, python):
        results = _check_on_threads([same, odd, same])
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], ValueError)
        assert f"rank 0 {same}, rank 1 {odd}" in str(results[1]) and "SMDDP_ROUTES" in str(results[1])


def test_both_group_flavours_check_their_routes_at_creation() -> None:
    for create in (cuda_path.CudaPath.__init__, native_backend.create):
        src = inspect.getsource(create)
        assert "check_same_routes(store, rank, size, route_plan(" in src, create.__qualname__
