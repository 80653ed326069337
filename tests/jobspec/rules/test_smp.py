from __future__ import annotations

from typing import Any

import pytest

from ..conftest import messages, problems

P = "distribution.smdistributed.modelparallel.parameters"


def _v1(args: dict[str, Any], pph: int = 8, count: int = 1, **params: Any) -> dict[str, Any]:
    args.update(instance_type="ml.p3.16xlarge", instance_count=count, framework_version="1.13.1", py_version="py39",
                distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": params}},
                              "mpi": {"enabled": True, "processes_per_host": pph}})
    return args


def _v2(args: dict[str, Any], count: int = 2, **params: Any) -> dict[str, Any]:
    args.update(instance_count=count, distribution={"torch_distributed": {"enabled": True},
                                                    "smdistributed": {"modelparallel": {"enabled": True,
                                                                                        "parameters": params}}})
    return args


def test_seed_v1_configurations_validate(args: dict[str, Any]) -> None:
    assert problems("pytorch", _v1(dict(args), pipeline_parallel_degree=1, placement_strategy="cluster",
                                   tensor_parallel_degree=4, ddp=True)) == []
    assert problems("pytorch", _v1(dict(args), microbatches=4, pipeline_parallel_degree=2, placement_strategy="cluster",
                                   tensor_parallel_degree=2, ddp=True)) == []


@pytest.mark.parametrize(("params", "paths"), [
    ({"tensor_parallel_degree": 3, "ddp": True}, [f"{P}.tensor_parallel_degree"]),
    ({"pipeline_parallel_degree": 3}, [f"{P}.pipeline_parallel_degree"]),
    ({"partitions": 3}, [f"{P}.partitions"]),
    ({"pipeline_parallel_degree": 4, "tensor_parallel_degree": 4, "ddp": True}, [f"{P}.tensor_parallel_degree"]),
    ({"partitions": 2, "pipeline_parallel_degree": 4}, [f"{P}.partitions"]),
    ({"auto_partition": False}, [f"{P}.default_partition"]),
    ({"auto_partition": False, "default_partition": 2, "partitions": 2}, [f"{P}.default_partition"]),
    ({"ddp_port": 1234}, [f"{P}.ddp_port"]),
    ({"ddp_dist_backend": "nccl"}, [f"{P}.ddp_dist_backend"]),
    ({"ddp": True, "horovod": True}, [f"{P}.horovod"]),
    ({"fp16": True, "bf16": True}, [f"{P}.bf16"]),
    ({"tensor_parallel_degree": 2}, [f"{P}.ddp"]),
    ({"sharded_data_parallel_degree": 3}, [f"{P}.sharded_data_parallel_degree"]),
    ({"microbatches": 0}, [f"{P}.microbatches"]),
    ({"memory_weight": 2.0}, [f"{P}.memory_weight"]),
    ({"placement_strategy": "DDP"}, [f"{P}.placement_strategy"]),
])
def test_v1_rules(args: dict[str, Any], params: dict[str, Any], paths: list[str]) -> None:
    assert problems("pytorch", _v1(args, **params)) == paths


def test_v1_arithmetic_uses_world_size(args: dict[str, Any]) -> None:
    # 2 hosts × 4 processes = 8: TP 8 fits; 3 hosts × 4 = 12: TP 8 does not
    assert problems("pytorch", _v1(dict(args), pph=4, count=2, tensor_parallel_degree=8, ddp=True)) == []
    errs = messages("pytorch", _v1(dict(args), pph=4, count=3, tensor_parallel_degree=8, ddp=True))
    assert errs == {f"{P}.tensor_parallel_degree": "must divide the world size 12 "
                                                   "(instance_count × processes_per_host); "
                                                   "use a divisor of 12 or change the cluster"}


@pytest.mark.parametrize(("params", "paths"), [
    ({"tensor_parallel_degree": 4, "hybrid_shard_degree": 4}, []),
    ({"tensor_parallel_degree": 3}, [f"{P}.tensor_parallel_degree"]),
    ({"tensor_parallel_degree": 4, "hybrid_shard_degree": 3}, [f"{P}.hybrid_shard_degree"]),
    ({"hybrid_shard_degree": 2, "context_parallel_degree": 4}, [f"{P}.context_parallel_degree"]),
    ({"hybrid_shard_degree": 0, "tensor_parallel_degree": 8, "context_parallel_degree": 4},
     [f"{P}.context_parallel_degree"]),
    ({"context_parallel_degree": 3}, [f"{P}.context_parallel_degree"]),
    ({"expert_parallel_degree": 3}, [f"{P}.expert_parallel_degree"]),
    ({"expert_parallel_degree": 2, "tensor_parallel_degree": 2}, [f"{P}.expert_parallel_degree"]),
    ({"microbatches": 4}, [f"{P}.microbatches"]),
])
def test_v2_rules(args: dict[str, Any], params: dict[str, Any], paths: list[str]) -> None:
    assert problems("pytorch", _v2(args, **params)) == paths


def test_v2_all_problems_at_once(args: dict[str, Any]) -> None:
    assert problems("pytorch", _v2(args, tensor_parallel_degree=3, expert_parallel_degree=2, partitions=2,
                                   hybrid_shard_degree="x")) == [
        f"{P}.expert_parallel_degree", f"{P}.hybrid_shard_degree", f"{P}.partitions", f"{P}.tensor_parallel_degree"]


def test_disabled_modelparallel_is_not_checked(args: dict[str, Any]) -> None:
    args["distribution"] = {"smdistributed": {"modelparallel": {"enabled": False,
                                                                "parameters": {"tensor_parallel_degree": 3}}}}
    assert problems("pytorch", args) == []
