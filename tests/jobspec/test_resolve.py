from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import resolve, validate_args


def _resolved(framework: str = "pytorch", job_name: str | None = None, **args: Any) -> Any:
    return resolve(validate_args(framework, args), job_name=job_name)


def test_defaults_and_names(args: dict[str, Any]) -> None:
    job = _resolved(**args)
    assert (job.job_name, job.strategy, job.processes_per_host, job.network_interface, job.master_port) == (
        "pytorch-training", "single", 1, "eth0", 7777)
    assert job.instance.gpus == 8 and job.entry_point == "train.py"
    assert _resolved(**{**args, "base_job_name": "exp"}).job_name == "exp"
    assert _resolved(job_name="given", **args).job_name == "given"


def test_bad_job_name(args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        _resolved(job_name="not valid!", **args)
    assert [e.path for e in info.value.errors] == ["job_name"]


def test_entry_point_without_source_dir_is_basename(args: dict[str, Any], code_dir: Any) -> None:
    del args["source_dir"]
    args["entry_point"] = str(code_dir / "train.py")
    assert _resolved(**args).entry_point == "train.py"


def test_smp_v1_parameters_fold_alias(args: dict[str, Any]) -> None:
    args.update(instance_type="ml.p3.16xlarge", instance_count=1,
                distribution={"mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-x A=1"},
                              "smdistributed": {"modelparallel": {"enabled": True,
                                                                  "parameters": {"partitions": 2, "microbatches": 4}}}})
    job = _resolved(**args)
    assert job.strategy == "smp_v1" and job.mp_parameters == {"pipeline_parallel_degree": 2, "microbatches": 4}
    assert (job.processes_per_host, job.custom_mpi_options) == (8, "-x A=1")


def test_local_types(args: dict[str, Any]) -> None:
    job = _resolved(**{**args, "instance_type": "local_gpu", "distribution": {"torch_distributed": {"enabled": True}}})
    assert (job.network_interface, job.processes_per_host, job.instance.local) == ("lo", 1, True)


def test_huggingface_version_is_the_base_framework(args: dict[str, Any]) -> None:
    del args["framework_version"]
    job = _resolved("huggingface", **{**args, "transformers_version": "4.36", "pytorch_version": "2.1"})
    assert (job.framework, job.framework_version) == ("huggingface", "2.1")


def test_instance_group_cluster(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    args["instance_groups"] = [{"instance_group_name": "g", "instance_type": "ml.g5.12xlarge", "instance_count": 3}]
    job = _resolved(**{**args, "distribution": {"torch_distributed": {"enabled": True}}})
    assert (job.instance_type, job.instance_count, job.processes_per_host) == ("ml.g5.12xlarge", 3, 4)


def test_copies_run_settings(args: dict[str, Any]) -> None:
    job = _resolved(**{**args, "max_run": 600, "output_path": "s3://bucket/out", "checkpoint_s3_uri": "s3://bucket/ck",
                       "region": "us-west-2", "environment": {"A": "1"}})
    assert (job.max_run, job.output_path, job.checkpoint_s3_uri, job.region, job.environment) == (
        600, "s3://bucket/out", "s3://bucket/ck", "us-west-2", {"A": "1"})


@pytest.mark.parametrize("model_dir", [None, False, "s3://bucket/models"])
def test_tensorflow_model_dir_is_carried(args: dict[str, Any], model_dir: Any) -> None:
    tf = {**args, "framework_version": "2.13", "py_version": "py310"}
    if model_dir is not None:
        tf["model_dir"] = model_dir
    assert _resolved("tensorflow", **tf).model_dir == model_dir


def test_model_dir_twice_is_an_error(args: dict[str, Any]) -> None:
    tf = {**args, "framework_version": "2.13", "py_version": "py310", "model_dir": "s3://bucket/a",
          "hyperparameters": {"model_dir": "s3://bucket/b"}}
    with pytest.raises(ValidationError) as info:
        validate_args("tensorflow", tf)
    assert [e.path for e in info.value.errors] == ["hyperparameters.model_dir"]
    # false omits the launcher's model_dir, so the script's own one is fine
    assert validate_args("tensorflow", {**tf, "model_dir": False}).model_dir is False


def test_instance_groups_resolve_to_the_distribution_group(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    groups = [{"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "instance_count": 3},
              {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    job = _resolved(**args, instance_groups=groups,
                    distribution={"mpi": {"enabled": True}, "instance_groups": ["train"]})
    assert (job.instance_type, job.instance_count, job.processes_per_host) == ("ml.p4d.24xlarge", 2, 8)
    assert [(g.name, g.instance_count, g.distribution) for g in job.instance_groups] == [("data", 3, False), ("train",
                                                                                                              2, True)]
    plain = _resolved(**args, instance_groups=groups)   # no distribution: no group runs ranks of a world
    assert plain.strategy == "single" and not any(g.distribution for g in plain.instance_groups)
    assert _resolved(**args, instance_groups=groups[1:]).instance_groups[0].name == "train"
