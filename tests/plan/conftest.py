"""Hand-made ResolvedJob objects: the planner is tested without the spec layer."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from smdist_launcher.jobspec.resolved import InstanceInfo, ResolvedJob

P4D = InstanceInfo(instance_type="ml.p4d.24xlarge", gpus=8, efa=True, efa_rdma=True)
P3 = InstanceInfo(instance_type="ml.p3.16xlarge", gpus=8)
LOCAL = InstanceInfo(instance_type="local", local=True)


INSTANCES = {"p4d": P4D, "p3": P3, "local": LOCAL}


def resolved_job(**overrides: Any) -> ResolvedJob:
    """A valid job (torch_distributed, 2 × p4d, 8 processes); ``instance`` may name one of INSTANCES."""
    instance = overrides.pop("instance", P4D)
    instance = INSTANCES.get(instance, instance) if isinstance(instance, str) else instance
    fields: dict[str, Any] = dict(
        framework="pytorch", framework_version="2.3", py_version="py311", job_name="job", entry_point="train.py",
        source_dir="src", instance_type=instance.instance_type, instance_count=2, instance=instance,
        processes_per_host=8, strategy="torch_distributed", hyperparameters={"epochs": 2, "lr": 0.1},
    )
    if instance.local:
        fields["network_interface"] = "lo"
    fields.update(overrides)
    return ResolvedJob(**fields)


@pytest.fixture
def make_job() -> Callable[..., ResolvedJob]:
    return resolved_job
