from __future__ import annotations

import warnings
from typing import Any

import pytest

from smdist_launcher.errors import ValidationWarning
from smdist_launcher.jobspec import validate_args

from ..conftest import messages, problems


def test_cluster_is_required(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    assert problems("pytorch", args) == ["instance_count", "instance_type"]


def test_unknown_instance_type_did_you_mean(args: dict[str, Any]) -> None:
    assert "did you mean 'ml.p4d.24xlarge'" in messages("pytorch", {**args,
                                                                    "instance_type": "ml.p4d.24xlarg"})["instance_type"]
    assert "did you mean 'local_gpu'" in messages("pytorch", {**args, "instance_type": "local-gpu"})["instance_type"]


def test_instance_groups(args: dict[str, Any]) -> None:
    group = {"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}
    assert problems("pytorch", {**args, "instance_groups": [group]}) == ["instance_groups"]
    del args["instance_type"], args["instance_count"]
    assert problems("pytorch", {**args, "instance_groups": [group]}) == []
    assert problems("pytorch", {**args, "instance_groups": [{**group, "instance_type": "ml.p4"}]}) == [
        "instance_groups[0].instance_type"]


_DATA = {"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "instance_count": 1}
_TRAIN = {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}


@pytest.mark.parametrize("dist", [None, {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]},
                                  {"mpi": {"enabled": True}, "instance_groups": ["train"]},
                                  {"smdistributed": {"dataparallel": {"enabled": True}}, "instance_groups": ["train"]},
                                  {"torch_distributed": {"enabled": True}, "instance_groups": ["train"],
                                   "smdistributed": {"modelparallel": {"enabled": True,
                                                                       "parameters": {"hybrid_shard_degree": 16}}}}])
def test_heterogeneous_cluster(args: dict[str, Any], dist: dict[str, Any] | None) -> None:
    del args["instance_type"], args["instance_count"]
    assert problems("pytorch", {**args, "instance_groups": [_DATA, _TRAIN], "distribution": dist}) == []


def test_heterogeneous_cluster_rules(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    groups = {**args, "instance_groups": [_DATA, _TRAIN]}
    # with several groups the distribution names its group (SageMaker: "Distribution should only contain one
    # instance group name")
    msg = messages("pytorch", {**groups, "distribution": {"torch_distributed": {"enabled": True}}})
    assert (list(msg) == ["distribution.instance_groups"]
            and "instance_groups: [train]" in msg["distribution.instance_groups"])
    # the hardware rules read the distribution's group, not the first one
    msg = messages("pytorch", {**groups, "distribution": {"smdistributed": {"dataparallel": {"enabled": True}},
                                                          "instance_groups": ["data"]}})
    assert (list(msg) == ["distribution.smdistributed"]
            and "ml.c5.18xlarge has no GPUs" in msg["distribution.smdistributed"])
    # SMP's arithmetic is against the distribution group's world (2 hosts x 8 GPUs), not every host
    assert problems("pytorch", {**groups, "distribution": {
        "torch_distributed": {"enabled": True}, "instance_groups": ["train"],
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 24}}}}}) == [
        "distribution.smdistributed.modelparallel.parameters.hybrid_shard_degree"]
    assert problems("pytorch", {**args, "instance_groups": [_DATA, {**_DATA, "instance_count": 2}]}) == [
        "instance_groups[1].instance_group_name"]
    assert problems("pytorch", {**args, "instance_groups": [_DATA, {**_TRAIN, "instance_type": "local"}]}) == [
        "instance_groups"]
    assert problems("pytorch", {**args, "instance_groups": [{**_DATA, "instance_type": "local"},
                                                            {**_TRAIN,
                                                             "instance_type": "local_gpu"}]}) == ["instance_groups"]
    assert problems("pytorch", {**groups, "distribution": {"mpi": {"enabled": True}, "instance_groups": ["nope"]}}) == [
        "distribution.instance_groups[0]"]
    assert problems("pytorch", {**groups, "instance_groups": [_DATA, {**_TRAIN, "instance_type": "ml.p4"}]}) == [
        "instance_groups[1].instance_type"]


def test_heterogeneous_cluster_refuses_parameter_server(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    args.update(framework_version="2.14", py_version="py310", instance_groups=[_DATA, _TRAIN],
                distribution={"parameter_server": {"enabled": True}, "instance_groups": ["train"]})
    msg = messages("tensorflow", args)
    assert list(msg) == ["distribution.parameter_server"] and "instance groups" in msg["distribution.parameter_server"]


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
    from smdist_launcher.jobspec.local_capacity import capacity

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


def test_parameter_server_refused_on_one_instance_group_too(args: dict[str, Any]) -> None:
    # as the SDK: "Don't set training instance groups while no distribution strategies enabled!"
    del args["instance_type"], args["instance_count"]
    args.update(framework_version="2.14", py_version="py310", instance_groups=[_TRAIN],
                distribution={"parameter_server": {"enabled": True}})
    assert problems("tensorflow", args) == ["distribution.parameter_server"]
