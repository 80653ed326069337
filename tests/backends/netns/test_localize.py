"""Hosts with a network of their own (netns, docker) talk over eth0: their copy of a local plan names eth0
wherever the plan named lo."""
from __future__ import annotations

from smdist_launcher import PyTorch
from smdist_launcher.backends.local.localize import with_interface

from .conftest import EXAMPLE


def _plan(distribution):
    return PyTorch(entry_point="train.py", source_dir=str(EXAMPLE), instance_type="local", instance_count=2,
                   framework_version="2.3",
                   py_version="py311", distribution=distribution).plan(job_name="iface")


def test_mpirun_options_and_env_move_to_eth0():
    plan = _plan({"mpi": {"enabled": True, "processes_per_host": 2}})
    assert plan.network_interface == "lo"
    moved = with_interface(plan, "eth0")
    argv = moved.hosts[0].argv
    assert moved.network_interface == "eth0"
    for name in ("btl_tcp_if_include", "oob_tcp_if_include"):
        assert argv[argv.index(name) + 1] == "eth0"
    assert "NCCL_SOCKET_IFNAME=eth0" in argv and "NCCL_SOCKET_IFNAME=lo" not in argv
    assert plan.hosts[0].argv[plan.hosts[0].argv.index("btl_tcp_if_include") + 1] == "lo"  # the original is kept


def test_torchrun_env_moves_and_other_tokens_stay():
    plan = _plan({"torch_distributed": {"enabled": True}})
    moved = with_interface(plan, "eth0")
    envs = [moved.environment, *(h.env for h in moved.hosts)]
    assert all(e.get("NCCL_SOCKET_IFNAME", "eth0") == "eth0" for e in envs)
    assert [h.argv for h in moved.hosts] == [h.argv for h in plan.hosts]  # torchrun's argv names no interface
