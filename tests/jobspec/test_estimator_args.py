from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher.jobspec import validate_args
from smdist_launcher.jobspec.estimator_args import HuggingFaceArgs, PyTorchArgs, TensorFlowArgs

from .conftest import messages, problems


def test_valid_pytorch(args: dict[str, Any]) -> None:
    spec = validate_args("pytorch", args)
    assert isinstance(spec, PyTorchArgs)
    assert (spec.instance_count, spec.hyperparameters) == (2, {"epochs": 2, "lr": 0.1})


def test_unknown_argument_did_you_mean(args: dict[str, Any]) -> None:
    args["instance_cout"] = 2
    args["hyperparamters"] = {}
    errs = messages("pytorch", args)
    assert errs["instance_cout"].startswith("unknown key; did you mean 'instance_count'?")
    assert errs["hyperparamters"].startswith("unknown key; did you mean 'hyperparameters'?")


def test_framework_specific_arguments(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "transformers_version": "4.36"}) == ["transformers_version"]
    assert problems("pytorch", {**args, "model_dir": "/opt/ml/model"}) == ["model_dir"]
    spec = validate_args("tensorflow", {**args, "framework_version": "2.13", "model_dir": False})
    assert isinstance(spec, TensorFlowArgs) and spec.model_dir is False
    hf = {k: v for k, v in args.items() if k != "framework_version"}
    spec = validate_args("huggingface", {**hf, "transformers_version": "4.36", "pytorch_version": "2.1"})
    assert isinstance(spec, HuggingFaceArgs) and spec.base_framework == "pytorch"


def test_strict_types(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "instance_count": "2"}) == ["instance_count"]
    assert problems("pytorch", {**args, "instance_count": True}) == ["instance_count"]
    assert problems("pytorch", {**args, "use_spot_instances": "yes"}) == ["use_spot_instances"]


def test_environment_numbers_become_strings(args: dict[str, Any]) -> None:
    spec = validate_args("pytorch", {**args, "environment": {"PORT": 80, "RATIO": 0.5, "NAME": "x"}})
    assert spec.environment == {"PORT": "80", "RATIO": "0.5", "NAME": "x"}
    assert problems("pytorch", {**args, "environment": {"FLAG": True}}) == ["environment.FLAG"]


def test_tags_as_mapping_or_list(args: dict[str, Any]) -> None:
    a = validate_args("pytorch", {**args, "tags": {"team": "ml"}})
    b = validate_args("pytorch", {**args, "tags": [{"Key": "team", "Value": "ml"}]})
    assert a.tags == b.tags
    assert problems("pytorch", {**args, "tags": [{"key": "team", "Value": "ml"}]}) == ["tags[0].Key", "tags[0].key"]


def test_sagemaker_session_accepted_not_serialized(args: dict[str, Any]) -> None:
    session = object()
    spec = validate_args("pytorch", {**args, "sagemaker_session": session})
    assert spec.sagemaker_session is session
    assert "sagemaker_session" not in spec.model_dump()


def test_paths_resolve_against_base_dir(args: dict[str, Any], code_dir: Any) -> None:
    spec = validate_args("pytorch", {**args, "source_dir": "."}, base_dir=str(code_dir))
    assert spec.source_dir == "." and spec.source_dir_path == str(code_dir)
    assert spec.entry_point_path == str(code_dir / "train.py")


@pytest.mark.parametrize("debugger", [True, False, {"s3_output_path": "s3://b/d"}])
def test_debugger_hook_config(args: dict[str, Any], debugger: Any) -> None:
    assert problems("pytorch", {**args, "debugger_hook_config": debugger}) == []


def test_debugger_hook_config_bad(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "debugger_hook_config": 3}) == ["debugger_hook_config"]


def test_hyperparameter_encoding_is_v2_unless_v3_is_asked_for(args: dict[str, Any]) -> None:
    """The SDK v3 contract travels as data (ModelTrainer sets it; a job file may too); v2 stays the default."""
    from smdist_launcher.contract.hyperparameters import HyperparameterEncoding

    assert validate_args("pytorch", args).hyperparameter_encoding is HyperparameterEncoding.V2
    assert validate_args("pytorch", {**args, "hyperparameter_encoding": "v3"}).hyperparameter_encoding == "v3"
    assert "hyperparameter_encoding" not in validate_args("pytorch", args).model_dump(exclude_unset=True)
    errs = messages("pytorch", {**args, "hyperparameter_encoding": "v4"})
    assert "'v2' or 'v3'" in errs["hyperparameter_encoding"], errs
