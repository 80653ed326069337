from __future__ import annotations

import warnings
from typing import Any

import pytest

from smdist_launcher.errors import ValidationWarning
from smdist_launcher.spec import validate_args

from ..conftest import messages, problems


def test_cluster_is_required(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    assert problems("pytorch", args) == ["instance_count", "instance_type"]


def test_unknown_instance_type_did_you_mean(args: dict[str, Any]) -> None:
    assert "did you mean 'ml.p4d.24xlarge'" in messages("pytorch", {**args, "instance_type": "ml.p4d.24xlarg"})["instance_type"]
    assert "did you mean 'local_gpu'" in messages("pytorch", {**args, "instance_type": "local-gpu"})["instance_type"]


def test_instance_groups(args: dict[str, Any]) -> None:
    group = {"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}
    assert problems("pytorch", {**args, "instance_groups": [group]}) == ["instance_groups"]
    del args["instance_type"], args["instance_count"]
    assert problems("pytorch", {**args, "instance_groups": [group]}) == []
    assert problems("pytorch", {**args, "instance_groups": [group, {**group, "instance_group_name": "b"}]}) == ["instance_groups"]
    assert problems("pytorch", {**args, "instance_groups": [{**group, "instance_type": "ml.p4"}]}) == [
        "instance_groups[0].instance_type"]


@pytest.mark.parametrize("dist", [{"mpi": {"enabled": True}}, {"pytorchddp": {"enabled": True}},
                                  {"smdistributed": {"dataparallel": {"enabled": True}}}])
def test_trainium_only_torch_distributed(args: dict[str, Any], dist: dict[str, Any]) -> None:
    args.update(instance_type="ml.trn1.32xlarge", framework_version="1.13.1", distribution=dist)
    (path,) = problems("pytorch", args)
    assert path == "distribution." + next(iter(dist))
    assert "Trainium" in messages("pytorch", args)[path]


def test_smdistributed_needs_gpus(args: dict[str, Any]) -> None:
    args.update(instance_type="ml.m5.xlarge", distribution={"smdistributed": {"dataparallel": {"enabled": True}}})
    assert problems("pytorch", args) == ["distribution.smdistributed"]
    args["instance_type"] = "local"   # local mode runs smddp on CPU (gloo)
    assert problems("pytorch", args) == []


def test_spot_not_in_local_mode(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "instance_type": "local", "use_spot_instances": True}) == ["use_spot_instances"]


def test_more_processes_than_gpus_warns(args: dict[str, Any]) -> None:
    args["distribution"] = {"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 16}}
    with pytest.warns(ValidationWarning, match="16 processes per host but ml.p4d.24xlarge has 8 GPUs"):
        validate_args("pytorch", args)


def test_matching_processes_do_not_warn(args: dict[str, Any]) -> None:
    args["distribution"] = {"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 8}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_args("pytorch", args)


def test_sagemaker_cluster_bounds_name_the_limit(args: dict[str, Any]) -> None:
    got = messages("pytorch", {**args, "instance_count": 2**31,
                               "distribution": {"torch_distributed": {"enabled": True},
                                                "mpi": {"processes_per_host": 100_000}}})
    assert "2,147,483,648 instances; at most 4,096 per training job" in got["instance_count"]
    assert "at most 96 (ml.p4d.24xlarge has 96 vCPUs)" in got["distribution.mpi.processes_per_host"]
    ok = {**args, "instance_count": 4096, "distribution": {"torch_distributed": {"enabled": True},
                                                           "mpi": {"processes_per_host": 8}}}
    assert problems("pytorch", ok) == []


def test_local_cluster_is_bounded_by_this_machine(args: dict[str, Any]) -> None:
    from smdist_launcher.spec.local_capacity import capacity

    room = capacity().processes
    got = messages("pytorch", {**args, "instance_type": "local", "instance_count": 2**31})
    assert "local mode runs every host on this machine: 2,147,483,648 hosts" in got["instance_count"]
    assert f"at most {room:,}: " in got["instance_count"]
    got = messages("pytorch", {**args, "instance_type": "local", "instance_count": 2,
                               "distribution": {"torch_distributed": {"enabled": True},
                                                "mpi": {"processes_per_host": room}}})
    assert "lower instance_count or processes_per_host" in got["distribution.mpi.processes_per_host"]
    assert problems("pytorch", {**args, "instance_type": "local", "instance_count": 2}) == []


def test_integers_past_pythons_4300_digit_limit_are_reported_not_raised(args: dict[str, Any]) -> None:
    huge = 10**5000  # str(huge) raises ValueError: every message must avoid printing it in full
    got = messages("pytorch", {**args, "instance_count": huge, "max_run": huge,
                               "distribution": {"torch_distributed": {"enabled": True},
                                                "mpi": {"processes_per_host": huge}}})
    assert "about 10^5000 instances" in got["instance_count"]
    assert "about 10^5000 processes per host" in got["distribution.mpi.processes_per_host"]
    assert "an integer of about 5000 digits" in got["max_run"]
    assert "about 10^5000 hosts" in messages("pytorch", {**args, "instance_type": "local",
                                                         "instance_count": huge})["instance_count"]
