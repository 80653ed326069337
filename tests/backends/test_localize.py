from __future__ import annotations

from smdist_launcher.backends.local.localize import with_master_port

from .plans import tiny_plan


def _plan():
    argv = ["torchrun", "--nnodes", "2", "--master_addr", "algo-1", "--master_port", "7777", "train.py",
            "--port", "7777"]
    plan = tiny_plan(argv=argv, environment={"MASTER_PORT": "7777"})
    hosts = [h.model_copy(update={"env": {"MASTER_PORT": "7777", "OTHER": "7777"}}) for h in plan.hosts]
    return plan.model_copy(update={"hosts": hosts})


def test_only_the_master_port_changes():
    plan = _plan()
    moved = with_master_port(plan, 40123)
    assert moved.master.port == 40123
    for host in moved.hosts:
        # the user's own --port 7777 argument is left alone
        assert host.argv == ["torchrun", "--nnodes", "2", "--master_addr", "algo-1", "--master_port", "40123",
                             "train.py", "--port", "7777"]
        assert host.env == {"MASTER_PORT": "40123", "OTHER": "7777"}
    assert moved.environment == {"MASTER_PORT": "40123"}
    assert plan.master.port == 7777  # the original plan is untouched (frozen model)
