"""A v3 ModelTrainer's arguments mapped onto our spec and validated by our rules (jobspec/v3_arguments.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smdist_launcher.contract.hyperparameters import HyperparameterEncoding
from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec.v3_arguments import (
    base_job_name,
    estimator_arguments,
    input_channels,
    v3_path,
    validate_trainer,
)

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311"


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("")
    return tmp_path


def _trainer(src: Path, **more: Any) -> dict[str, Any]:
    return {"training_image": IMAGE, "source_code": {"source_dir": str(src), "entry_script": "train.py"}, **more}


def _errors(kwargs: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        validate_trainer(kwargs)
    return {e.path: e.message for e in info.value.errors}


def test_v3_defaults_become_the_spec() -> None:
    args, errors = estimator_arguments({"training_image": IMAGE, "source_code": {"entry_script": "train.py"}})
    assert errors == []
    assert args == {"image_uri": IMAGE, "base_job_name": "pytorch-training-job", "entry_point": "train.py",
                    "instance_type": "ml.m5.xlarge", "instance_count": 1, "max_run": 3600,
                    "hyperparameter_encoding": HyperparameterEncoding.V3}


def test_base_job_names_take_v3s_underscore_rule(src: Path) -> None:
    """v3 names its jobs from base_job_name with `_` as `-` (sagemaker.train.utils._get_unique_name), its default
    base included (`<image repository>-job`); the rest of SageMaker's job-name rule still applies."""
    job = validate_trainer(_trainer(src, base_job_name="local_mode_multi_container"))
    assert job.spec.base_job_name == "local-mode-multi-container"
    assert base_job_name(job.data) == "local_mode_multi_container"
    job = validate_trainer({**_trainer(src), "training_image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/my_repo"})
    assert job.spec.base_job_name == "my-repo-job" and base_job_name(job.data) == "my_repo-job"
    assert "job-name rule" in _errors(_trainer(src, base_job_name="bad.name"))["base_job_name"]


def test_torchrun_on_two_hosts(src: Path) -> None:
    job = validate_trainer(_trainer(src, distributed={"type": "torchrun", "process_count_per_node": 8},
                                    compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2}))
    assert job.spec.distribution is not None
    assert job.spec.distribution.normalized() == {"torch_distributed": {"enabled": True},
                                                  "mpi": {"processes_per_host": 8}}


def test_smp_becomes_smp_v2(src: Path) -> None:
    smp = {"hybrid_shard_degree": 2, "tensor_parallel_degree": 4, "sm_activation_offloading": True}
    job = validate_trainer(_trainer(src, distributed={"smp": smp},
                                    compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2}))
    dist = job.spec.distribution
    assert dist is not None and dist.modelparallel_on and dist.on("torch_distributed")
    assert dist.normalized()["smdistributed"]["modelparallel"]["parameters"] == smp


def test_mpi_options_list_becomes_one_string_that_splits_back(src: Path) -> None:
    import shlex

    options = ["-x", "NCCL_DEBUG=WARN", "--mca", "btl_tcp_if_exclude", "lo docker0"]
    job = validate_trainer(_trainer(src, distributed={"type": "mpi", "process_count_per_node": 2,
                                                      "mpi_additional_options": options},
                                    compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2}))
    mpi = job.spec.distribution.normalized()["mpi"] if job.spec.distribution else {}
    assert mpi["enabled"] is True and mpi["processes_per_host"] == 2
    assert shlex.split(mpi["custom_mpi_options"]) == options


def test_heterogeneous_groups_without_distribution_plan_every_host(src: Path) -> None:
    groups = [{"instance_group_name": "data", "instance_type": "ml.c5.2xlarge", "instance_count": 1},
              {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    job = validate_trainer(_trainer(src, compute={"instance_groups": groups}))
    assert [g.instance_group_name for g in job.spec.instance_groups or []] == ["data", "train"]
    assert job.spec.instance_type is None


def test_one_group_carries_the_distribution(src: Path) -> None:
    groups = [{"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    job = validate_trainer(_trainer(src, compute={"instance_groups": groups}, distributed={"type": "torchrun"}))
    assert job.spec.distribution is not None and job.spec.distribution.instance_groups == ["train"]


def test_bad_smp_degrees_are_named_at_their_v3_paths(src: Path) -> None:
    errors = _errors(_trainer(src, distributed={"type": "torchrun", "process_count_per_node": 8,
                                                "smp": {"tensor_parallel_degree": 3}},
                              compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2}))
    assert "must divide the world size 16" in errors["distributed.smp.tensor_parallel_degree"]


def test_every_problem_at_once_unknown_unsupported_and_rules(src: Path) -> None:
    errors = _errors({"source_code": {"source_dir": str(src), "command": "python train.py", "args": ["--x"],
                                      "requirements": "reqs.txt", "bogus": 1},
                      "distributed": {"type": "torchrun", "smp": {"tensor_parallel_degre": 2}},
                      "compute": {"instance_type": "ml.p9.mega", "instance_count": 0},
                      "stopping_condition": {"max_runtime_in_seconds": "1h"},
                      "algorithm_name": "xgboost", "frobnicate": True})
    expected = {"training_image", "algorithm_name", "frobnicate", "source_code.bogus", "source_code.command",
                "source_code.args", "source_code.requirements", "distributed.smp.tensor_parallel_degre",
                "compute.instance_count", "stopping_condition.max_runtime_in_seconds", "compute.instance_type"}
    assert expected <= set(errors), sorted(set(errors))
    assert "did you mean 'tensor_parallel_degree'" in errors["distributed.smp.tensor_parallel_degre"]
    assert "is required" in errors["training_image"]


def test_distribution_across_several_groups_is_refused_with_the_reason(src: Path) -> None:
    groups = [{"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 1},
              {"instance_group_name": "b", "instance_type": "ml.p4d.24xlarge", "instance_count": 1}]
    errors = _errors(_trainer(src, compute={"instance_groups": groups}, distributed={"type": "torchrun"}))
    assert "every host of every group" in errors["compute.instance_groups"]


def test_an_ambiguous_distributed_mapping_is_refused(src: Path) -> None:
    errors = _errors(_trainer(src, distributed={"process_count_per_node": 2}))
    assert "cannot tell Torchrun from MPI" in errors["distributed"]


def test_local_container_mode_needs_a_local_type(src: Path) -> None:
    errors = _errors(_trainer(src, training_mode="LOCAL_CONTAINER"))
    assert "local" in errors["training_mode"]
    job = validate_trainer(_trainer(src, training_mode="LOCAL_CONTAINER", compute={"instance_type": "local"}))
    assert job.spec.instance_type == "local"


def test_input_data_as_channels() -> None:
    channels, errors = input_channels([
        {"channel_name": "train", "data_source": "s3://bucket/train"},
        {"channel_name": "test", "data_source": {"s3_uri": "s3://bucket/test",
                                                 "s3_data_distribution_type": "ShardedByS3Key"},
         "content_type": "text/csv"},
        {"channel_name": "train", "data_source": "s3://bucket/again"},
        {"channel_name": "fs", "data_source": {"file_system_id": "fs-1"}},
    ])
    assert channels == {"train": {"uri": "s3://bucket/train"},
                        "test": {"uri": "s3://bucket/test", "distribution": "ShardedByS3Key",
                                 "content_type": "text/csv"}}
    assert {e.path.split(".")[0] for e in errors} == {"input_data_config[2]", "input_data_config[3]"}


def test_our_paths_translate_to_v3_paths() -> None:
    assert v3_path("distribution.mpi.processes_per_host") == "distributed.process_count_per_node"
    assert v3_path("distribution.smdistributed.modelparallel.parameters.x") == "distributed.smp.x"
    assert v3_path("instance_groups[1].instance_count") == "compute.instance_groups[1].instance_count"
    assert v3_path("max_run") == "stopping_condition.max_runtime_in_seconds"
    assert v3_path("hyperparameters.lr") == "hyperparameters.lr"
    assert v3_path("instance_type_x") == "instance_type_x"  # a prefix only at a key boundary


def test_hyperparameters_from_a_json_or_yaml_file(src: Path) -> None:
    (src / "hp.yaml").write_text("epochs: 2\noptimizer: sgd\n")
    job = validate_trainer(_trainer(src, hyperparameters=str(src / "hp.yaml")))
    assert job.spec.hyperparameters == {"epochs": 2, "optimizer": "sgd"}
    (src / "list.json").write_text("[1, 2]")
    errors = _errors(_trainer(src, hyperparameters=str(src / "list.json")))
    assert "must hold a mapping" in errors["hyperparameters"]
    assert "cannot be read" in _errors(_trainer(src, hyperparameters=str(src / "missing.json")))["hyperparameters"]
