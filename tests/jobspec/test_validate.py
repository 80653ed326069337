from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import validate_args

from .conftest import messages, problems


def test_all_problems_at_once_across_schema_and_rules(args: dict[str, Any]) -> None:
    args.update(instance_count=0, py_version="py2", entry_point="missing.py", hyperparamters={},
                distribution={"mpi": {"enabled": True, "process_per_host": 8}, "torch_distributed": {"enabled": True}})
    assert problems("pytorch", args) == ["distribution.mpi.enabled", "distribution.mpi.process_per_host", "entry_point",
                                         "hyperparamters", "instance_count", "py_version"]


def test_rules_still_run_when_unrelated_fields_are_broken(args: dict[str, Any]) -> None:
    args.update(volume_size="big", distribution={"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}})
    assert problems("pytorch", args) == ["distribution.mpi.enabled", "volume_size"]


def test_no_spurious_errors_under_a_broken_value(args: dict[str, Any]) -> None:
    # instance_count is broken: no "instance_count is required" on top, no arithmetic on a guessed world size
    args.update(instance_count="2", distribution={"torch_distributed": {"enabled": True}, "smdistributed": {
        "modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 3}}}})
    assert problems("pytorch", args) == ["instance_count"]


def test_unknown_framework() -> None:
    with pytest.raises(ValidationError) as info:
        validate_args("pytroch", {})
    (error,) = info.value.errors
    assert (error.path, error.value) == ("framework", "pytroch")
    assert "did you mean 'pytorch'" in error.message


def test_arguments_must_be_a_mapping() -> None:
    with pytest.raises(ValidationError) as info:
        validate_args("pytorch", ["entry_point"])
    assert [e.path for e in info.value.errors] == ["<root>"]


def test_error_carries_value_and_renders_like_a_compiler(args: dict[str, Any]) -> None:
    args["distribution"] = {"mpi": {"enabled": True, "processes_per_host": 0}}
    with pytest.raises(ValidationError) as info:
        validate_args("pytorch", args, source="job.yaml")
    (error,) = info.value.errors
    assert error.value == 0 and error.has_value
    assert "job.yaml: distribution.mpi.processes_per_host: must be ≥ 1, got 0" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_messages_never_leak_pydantic_wording(args: dict[str, Any]) -> None:
    args.update(instance_count=[1], tags="x", distribution={"smdistributed": {"dataparallel": "yes"}}, max_run=-1)
    errs = messages("pytorch", args)
    assert set(errs) == {"instance_count", "tags", "distribution.smdistributed.dataparallel", "max_run"}
    assert not any("Input should" in m or "Value error" in m for m in errs.values())


def test_sdk_v1_names_and_fit_arguments_are_explained(args: dict[str, Any]) -> None:
    del args["instance_type"]
    args.update(train_instance_type="ml.p4d.24xlarge", inputs="s3://bucket/x")
    errs = messages("pytorch", args)
    assert errs["train_instance_type"] == "is the SageMaker SDK v1 name; use 'instance_type'"
    assert errs["inputs"].startswith("unknown argument: inputs are given to fit(inputs=...)")


def test_env_is_pointed_at_environment_and_still_refused(args: dict[str, Any]) -> None:
    # an amazon-sagemaker-examples notebook passes env= to an estimator; SDK v2's name is environment=
    args["env"] = {"NCCL_DEBUG": "INFO"}
    assert messages("pytorch", args) == {"env": "unknown key; did you mean 'environment'?"}


# ---- one schema error must not hide the rules of its siblings ----------------------------------------------------
SMP = "distribution.smdistributed.modelparallel"
TP3_V2 = {"torch_distributed": {"enabled": True},
          "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 3}}}}


def _with(block: dict[str, Any], path: str, key: str, value: Any) -> dict[str, Any]:
    node = block
    for part in path.split("."):
        node = node.setdefault(part, {})
    node[key] = value
    return block


@pytest.mark.parametrize(("where", "key", "value"), [
    ("smdistributed.modelparallel.parameters", "hybrid_shard_degre", 2),   # misspelled sibling
    ("smdistributed.modelparallel.parameters", "random_seed", "x"),         # badly typed sibling
    ("smdistributed.modelparallel", "microbatches", 2),                     # misplaced key
    ("mpi", "foo", 1),                                                      # stray key in a block that sizes the world
    ("torch_distributed", "foo", 1),
    ("mpi", "custom_mpi_options", 5),                                       # sizes nothing
])
def test_smp_arithmetic_survives_a_broken_sibling(args: dict[str, Any], where: str, key: str, value: Any) -> None:
    import copy
    args["distribution"] = _with(copy.deepcopy(TP3_V2), where, key, value)
    errs = messages("pytorch", args)
    assert errs[f"{SMP}.parameters.tensor_parallel_degree"].startswith("must divide the world size 16")
    assert len(errs) == 2


def test_smp_parameters_file_with_a_typo_still_gets_its_arithmetic_checked(args: dict[str, Any], tmp_path: Any) -> None:
    (tmp_path / "smp.json").write_text('{"tensor_parallel_degree": 3, "hybrid_shard_degre": 2}')
    args["distribution"] = {"torch_distributed": {"enabled": True},
                            "smdistributed": {"modelparallel": {"enabled": True, "parameters": "smp.json"}}}
    assert problems("pytorch", args, base_dir=str(tmp_path)) == [f"{SMP}.parameters.hybrid_shard_degre",
                                                                  f"{SMP}.parameters.tensor_parallel_degree"]


def test_misspelled_processes_per_host_gives_no_made_up_world_size(args: dict[str, Any]) -> None:
    # the world size would use the default 8 processes per host, not the 3 the user meant: say only the typo
    args["distribution"] = {"mpi": {"enabled": True, "processes_per_hots": 3}, "smdistributed": {
        "modelparallel": {"enabled": True, "parameters": {"pipeline_parallel_degree": 3, "ddp": True}}}}
    assert problems("pytorch", args) == ["distribution.mpi.processes_per_hots"]


def test_a_broken_degree_gives_no_made_up_product(args: dict[str, Any]) -> None:
    args["distribution"] = {"mpi": {"enabled": True, "processes_per_host": 8}, "smdistributed": {"modelparallel": {
        "enabled": True, "parameters": {"pipeline_parallel_degree": "4", "tensor_parallel_degree": 4, "ddp": True,
                                        "sharded_data_parallel_degree": 8}}}}
    assert problems("pytorch", args) == [f"{SMP}.parameters.pipeline_parallel_degree"]


def test_stray_key_does_not_hide_the_rule_on_its_block(args: dict[str, Any]) -> None:
    args.update(framework_version="2.14", py_version="py310",
                distribution={"parameter_server": {"enabled": True, "foo": 1}, "mpi": {"enabled": True}})
    assert problems("tensorflow", args) == ["distribution.parameter_server", "distribution.parameter_server.foo"]


def test_misspelled_key_still_hides_the_message_it_explains(args: dict[str, Any]) -> None:
    # "smdistributed: choose a strategy" and "instance_type is required" would only repeat the typo
    del args["instance_type"]
    args.update(instance_tyep="ml.p4d.24xlarge", distribution={"smdistributed": {"dataparalel": {"enabled": True}}})
    assert problems("pytorch", args) == ["distribution.smdistributed.dataparalel", "instance_tyep"]


def test_incomplete_instance_group_is_not_called_a_heterogeneous_cluster(args: dict[str, Any]) -> None:
    del args["instance_type"], args["instance_count"]
    args["instance_groups"] = [{"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge"}]
    assert problems("pytorch", args) == ["instance_groups[0].instance_count"]
    args["instance_groups"] = []
    assert messages("pytorch", args)["instance_groups"].startswith("must define one instance group")


def test_unknown_key_next_to_the_key_it_resembles_hides_nothing(args: dict[str, Any]) -> None:
    # job_name resembles base_job_name, but base_job_name is given too: its own problem is still reported
    args.update(job_name="x", base_job_name="bad name")
    assert problems("pytorch", args) == ["base_job_name", "job_name"]


def test_a_typo_in_the_strategy_key_is_the_only_problem(args: dict[str, Any]) -> None:
    for typo in ({"torch_distribute": {"enabled": True}}, {"torch_distributed": {"enabeld": True}}):
        args["distribution"] = {**typo, "mpi": {"processes_per_host": 2}}
        found = messages("pytorch", args)
        assert "distribution.mpi.enabled" not in found, found   # mpi's block is fine: torchrun's was misspelt
        assert len(found) == 1
    args["distribution"] = {"mpi": {"processes_per_host": 2}}     # a lone mpi block without enabled still is a problem
    assert list(messages("pytorch", args)) == ["distribution.mpi.enabled"]


def test_processes_per_host_under_torch_distributed_points_to_mpi(args: dict[str, Any]) -> None:
    args["distribution"] = {"torch_distributed": {"enabled": True, "processes_per_host": 2}}
    found = messages("pytorch", args)
    assert list(found) == ["distribution.torch_distributed.processes_per_host"]
    assert ("did you mean distribution.mpi.processes_per_host?"
            in found["distribution.torch_distributed.processes_per_host"])
