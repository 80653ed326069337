"""attached_arguments: a request (or DescribeTrainingJob answer) back to estimator arguments. Pure: no AWS."""
from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.sagemaker import attached_arguments, build_request
from smdist_launcher.backends.sagemaker.request import JobTarget

from .conftest import ROLE

TARGET = JobTarget(region="us-west-2", role_arn=ROLE, output_path="s3://out/prefix",
                   submit_uri="s3://out/job-1/source/sourcedir.tar.gz")
GROUPS = [{"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "instance_count": 1},
          {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]


@pytest.mark.parametrize("strategy", [{"torch_distributed": {"enabled": True}},
                                      {"mpi": {"enabled": True, "processes_per_host": 4}}])
def test_heterogeneous_request_round_trips(kwargs: dict[str, Any], strategy: dict[str, Any]) -> None:
    cluster = {k: v for k, v in kwargs.items() if k not in ("instance_type", "instance_count")}
    est = PyTorch(**{**cluster, "instance_groups": GROUPS, "distribution": {**strategy, "instance_groups": ["train"]}})
    request = build_request(est.plan("s3://data/train", job_name="job-1"), est.spec, TARGET)

    args = attached_arguments(request)
    assert args["distribution"]["instance_groups"] == ["train"] and args["instance_groups"] == GROUPS
    again = PyTorch(**args)  # several groups: valid only with the distribution's group named
    plan = again.plan("s3://data/train", job_name="job-1")
    assert plan.master.host == "algo-2"
    assert build_request(plan, again.spec, TARGET) == request


def test_metric_definitions_round_trip(kwargs: dict[str, Any]) -> None:
    """serve builds its local job from the request: the regexes must reach it (and attach keeps them, as the SDK's)."""
    definitions = [{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}]
    est = PyTorch(**kwargs, metric_definitions=definitions)
    request = build_request(est.plan("s3://data/train", job_name="job-1"), est.spec, TARGET)

    args = attached_arguments(request)
    assert args["metric_definitions"] == definitions
    again = PyTorch(**args)
    assert build_request(again.plan("s3://data/train", job_name="job-1"), again.spec, TARGET) == request
