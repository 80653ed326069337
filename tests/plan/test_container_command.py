"""The plan of a container-command job (what serve runs for SDK v3's requests): one run of the command per host."""
from __future__ import annotations

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec.container_command import ContainerCommandJob
from smdist_launcher.plan.container_command import build_container_command_plan
from smdist_launcher.plan.model import Channel, LaunchPlan

V3_ARGS = ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"]


def _job(**fields: object) -> ContainerCommandJob:
    return ContainerCommandJob.checked(**{"job_name": "v3-job", "entrypoint": ["/bin/bash"], "arguments": V3_ARGS,
                                          **fields})


def test_every_host_runs_the_argv_as_given_with_hyperparameters_as_sent() -> None:
    hps = {"epochs": "2", "optimizer": "sgd", "mp_parameters": '{"tensor_parallel_degree": 2}'}
    plan = build_container_command_plan(_job(instance_count=3, hyperparameters=hps),
                                        {"code": Channel(uri="s3://b/code"), "sm_drivers": Channel(uri="s3://b/d")})
    assert plan.launcher == "container_command"
    assert plan.host_names == ["algo-1", "algo-2", "algo-3"]
    assert all(h.argv == ["/bin/bash", *V3_ARGS] and h.role == "node" and h.ranks == [] for h in plan.hosts)
    assert plan.sagemaker_hyperparameters == hps        # raw strings, no json.dumps on top
    assert plan.hyperparameters == {}                    # we pass nothing to a script: the command decides
    assert set(plan.channels) == {"code", "sm_drivers"}
    assert (plan.master.host, plan.master.port) == ("algo-1", 7777)
    # shown like any plan and read back unchanged
    assert "launcher: container_command" in plan.to_yaml()
    assert LaunchPlan.from_json(plan.to_json()) == plan


def test_every_group_of_a_heterogeneous_job_runs_the_command() -> None:
    groups = [{"name": "data", "instance_type": "ml.c5.xlarge", "instance_count": 1},
              {"name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    plan = build_container_command_plan(_job(instance_groups=groups))
    assert plan.host_names == ["algo-1", "algo-2", "algo-3"]
    assert plan.instance_groups is not None
    assert [(g.name, g.hosts, g.distribution) for g in plan.instance_groups] == [
        ("data", ["algo-1"], True), ("train", ["algo-2", "algo-3"], True)]
    assert all(h.argv[0] == "/bin/bash" for h in plan.hosts)


def test_a_job_without_a_command_is_refused_with_its_key() -> None:
    with pytest.raises(ValidationError) as info:
        ContainerCommandJob.checked(job_name="j", entrypoint=[], instance_count=0)
    paths = {e.path for e in info.value.errors}
    assert {"entrypoint", "instance_count"} <= paths
