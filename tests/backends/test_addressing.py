from __future__ import annotations

import pytest

from smdist_launcher.backends.local.addressing import free_port, host_addresses, split_gpus, visible_gpus


def test_each_host_gets_its_own_loopback_address():
    assert host_addresses(["algo-1", "algo-2", "algo-3"]) == {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3",
                                                              "algo-3": "127.0.0.4"}
    assert host_addresses(["algo-1", "algo-2"], block=7) == {"algo-1": "127.7.0.2", "algo-2": "127.7.0.3"}
    many = host_addresses([f"algo-{i}" for i in range(1, 301)], block=1)
    assert many["algo-300"] == "127.1.1.45" and len(set(many.values())) == 300


def test_local_gpu_splits_visible_gpus_across_hosts():
    assert split_gpus(["0", "1", "2", "3"], ["algo-1", "algo-2"], 2) == {"algo-1": ["0", "1"], "algo-2": ["2", "3"]}
    assert split_gpus(["4", "5", "6"], ["algo-1", "algo-2", "algo-3"], 1) == {"algo-1": ["4"], "algo-2": ["5"],
                                                                              "algo-3": ["6"]}
    with pytest.raises(ValueError, match="local_gpu needs at least one GPU per simulated host"):
        split_gpus([], ["algo-1"], 1)
    with pytest.raises(ValueError, match="processes_per_host: 3 processes per host but only 2 GPU"):
        split_gpus(["0", "1", "2", "3"], ["algo-1", "algo-2"], 3)


def test_visible_gpus_reads_cuda_visible_devices():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
