from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.spec import validate_args

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
