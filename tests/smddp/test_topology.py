"""Which groups may use the NVLink fast paths."""
from __future__ import annotations

import torch.distributed as dist

from smdist_launcher.smddp.topology import exchange_locations, single_nvlink_island


def test_locations_round_trip_through_the_store() -> None:
    store = dist.HashStore()
    store.set("smddp/where/1", "host|with|bars|1")  # the device index is after the last bar
    here = exchange_locations(store, 0, 2, 0)
    assert here[0][1] == 0 and here[1] == ("host|with|bars", 1)


def test_two_hosts_or_a_shared_gpu_disable_the_fast_paths() -> None:
    ok, why = single_nvlink_island([("a", 0), ("b", 0)])
    assert not ok and "2 hosts" in why
    ok, why = single_nvlink_island([("a", 0), ("a", 0)])
    assert not ok and "share one GPU" in why
