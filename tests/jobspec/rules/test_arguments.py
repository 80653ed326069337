from __future__ import annotations

from typing import Any

import pytest

from ..conftest import messages, problems


@pytest.mark.parametrize(("hyperparameters", "path"), [
    ({"sagemaker_program": "x"}, "hyperparameters.sagemaker_program"),
    ({"": 1}, "hyperparameters."),
    ({"lr": float("nan")}, "hyperparameters.lr"),
    ({"obj": object()}, "hyperparameters.obj"),
])
def test_hyperparameters(args: dict[str, Any], hyperparameters: dict[str, Any], path: str) -> None:
    assert problems("pytorch", {**args, "hyperparameters": hyperparameters}) == [path]


def test_hyperparameters_with_shell_characters_are_fine(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "hyperparameters": {"cmd": "$(rm -rf /); echo 'x' \"y\"\n",
                                                            "nested": {"a": [1]}}}) == []


def test_mp_parameters_reserved_with_smp(args: dict[str, Any]) -> None:
    args.update(hyperparameters={"mp_parameters": "{}"},
                distribution={"torch_distributed": {"enabled": True},
                              "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}}})
    assert problems("pytorch", args) == ["hyperparameters.mp_parameters"]


def test_environment_names(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "environment": {"1BAD": "x", "GOOD_1": "y", "A-B": "z"}}) == [
        "environment.1BAD", "environment.A-B"]


@pytest.mark.parametrize(("key", "value"), [
    ("output_path", "bucket/out"), ("output_path", "file:///tmp/out"), ("code_location", "http://x"),
    ("checkpoint_s3_uri", "/local"), ("checkpoint_local_path", "relative/dir"), ("model_uri", "ftp://x"),
    ("base_job_name", "bad_name"), ("base_job_name", "-x"), ("region", "mars-1"), ("role", "not a role"),
    # fullmatched: a trailing newline does not pass (re.match with `$` let it); the checkpoint folder stays in /opt/ml
    ("base_job_name", "job\n"), ("region", "us-west-2\n"), ("output_path", "s3://bucket/out\n"),
    ("checkpoint_local_path", "/opt/ml/../../etc/cron.d"), ("checkpoint_local_path", "/data/ckpt"),
])
def test_bad_values(args: dict[str, Any], key: str, value: str) -> None:
    assert problems("pytorch", {**args, key: value}) == [key]


def test_file_output_path_in_local_mode(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "instance_type": "local", "output_path": "file:///tmp/out"}) == []


@pytest.mark.parametrize("instance_type", ["local", "local_gpu", "local_cpu"])
@pytest.mark.parametrize("role", ["dummy/unused-role", "SageMakerRole", "arn:aws:iam::111122223333:role/Train",
                                  "service-role/AmazonSageMaker-ExecutionRole-1"])
def test_local_mode_takes_any_role_the_sdk_local_session_takes(args: dict[str, Any], instance_type: str,
                                                               role: str) -> None:
    # sagemaker v2 Session.expand_role returns a role containing "/" unchanged (LocalSession inherits it, and its
    # local client ignores RoleArn): AWS's toolkit and DLC local tests pass role="dummy/unused-role"
    assert problems("pytorch", {**args, "instance_type": instance_type, "instance_count": 1, "role": role}) == []


@pytest.mark.parametrize("role", ["dummy/unused-role", "service-role/AmazonSageMaker-ExecutionRole-1", "a b"])
def test_cloud_jobs_refuse_a_role_create_training_job_refuses(args: dict[str, Any], role: str) -> None:
    # the SDK would pass "dummy/unused-role" unchanged and CreateTrainingJob's RoleArn takes only an ARN
    assert problems("pytorch", {**args, "role": role}) == ["role"]
    groups = [{"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": 1}]
    assert problems("pytorch", {**args, "instance_type": None, "instance_count": None, "instance_groups": groups,
                                "role": role}) == ["role"]


def test_local_mode_still_refuses_what_the_sdk_cannot_expand(args: dict[str, Any]) -> None:
    # no "/": the SDK asks IAM for the name, and "a b" is no IAM role name
    errs = messages("pytorch", {**args, "instance_type": "local", "instance_count": 1, "role": "a b"})
    assert "any value containing '/'" in errs["role"]


def test_vpc_needs_both(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "subnets": ["subnet-1"]}) == ["security_group_ids"]
    assert problems("pytorch", {**args, "security_group_ids": ["sg-1"]}) == ["subnets"]


def test_spot_rules(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "max_wait": 100}) == ["max_wait"]
    assert problems("pytorch", {**args, "use_spot_instances": True}) == ["max_wait"]
    assert "≥ max_run (3600 s)" in messages("pytorch", {**args, "use_spot_instances": True, "max_run": 3600,
                                                        "max_wait": 60})[
        "max_wait"]
    assert problems("pytorch", {**args, "use_spot_instances": True, "max_run": 3600, "max_wait": 7200}) == []


@pytest.mark.parametrize("key", ["git_config", "container_entry_point", "training_recipe"])
def test_unsupported_features_are_named(args: dict[str, Any], key: str) -> None:
    value = {"repo": "x"} if key == "git_config" else (["bash"] if key == "container_entry_point" else "recipe")
    assert problems("pytorch", {**args, key: value}) == [key]


def test_compiler_config_unsupported(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "compiler_config": {"enabled": True}}) == ["compiler_config"]
    assert problems("pytorch", {**args, "compiler_config": {"enabled": False}}) == []


def test_hyperparameter_limits_are_sagemakers_and_named_in_the_message(args: dict[str, Any]) -> None:
    big = "x" * 1_000_000
    hyperparameters = {"nul": "a\x00b", "huge": big, "k" * 257: 1, "fits": "y" * 2498, "nested": {"a": [big]}}
    got = dict(messages("pytorch", {**args, "hyperparameters": hyperparameters}))
    assert "NUL" in got["hyperparameters.nul"]
    assert "1,000,002 characters as JSON; SageMaker allows at most 2,500" in got["hyperparameters.huge"]
    assert "at most 2,500" in got["hyperparameters.nested"]
    assert "257 characters; SageMaker allows at most 256" in got["hyperparameters." + "k" * 257]
    assert "hyperparameters.fits" not in got  # 2,500 with its quotes: exactly the limit
    many = {f"h{i}": i for i in range(101)}
    assert "101 hyperparameters; SageMaker allows at most 100" in dict(
        messages("pytorch", {**args, "hyperparameters": many}))["hyperparameters"]


def test_environment_limits(args: dict[str, Any]) -> None:
    env = {"NUL": "a\x00b", "LONG": "v" * 513, "OK": "v" * 512}
    got = dict(messages("pytorch", {**args, "environment": env}))
    assert set(got) == {"environment.NUL", "environment.LONG"}
    assert "513 characters; SageMaker allows at most 512" in got["environment.LONG"]
    many = {f"E{i}": "1" for i in range(101)}
    assert "at most 100" in dict(messages("pytorch", {**args, "environment": many}))["environment"]


@pytest.mark.parametrize("uri", ["file:///tmp/ckpt", "file://ckpt", "/tmp/ckpt", "ckpt/run1", "s3://bucket/ckpt"])
def test_checkpoint_folder_in_local_mode(args: dict[str, Any], uri: str) -> None:
    # local mode restores from / saves to a folder on this machine (backends/toolkit/outputs.py)
    assert problems("pytorch", {**args, "instance_type": "local", "checkpoint_s3_uri": uri}) == []
    groups = [{"instance_group_name": "a", "instance_type": "local", "instance_count": 1}]
    assert problems("pytorch", {**{k: v for k, v in args.items() if k not in ("instance_type", "instance_count")},
                                "instance_groups": groups, "checkpoint_s3_uri": uri}) == []


@pytest.mark.parametrize("uri", ["file:///tmp/ckpt", "/tmp/ckpt", "ckpt"])
def test_checkpoint_folder_is_refused_on_sagemaker(args: dict[str, Any], uri: str) -> None:
    errs = messages("pytorch", {**args, "checkpoint_s3_uri": uri})  # ml.p4d.24xlarge
    assert list(errs) == ["checkpoint_s3_uri"]
    assert ("only with local instance types" in errs["checkpoint_s3_uri"]
            and "ml.p4d.24xlarge" in errs["checkpoint_s3_uri"])
    assert "s3://<bucket>/<prefix>" in errs["checkpoint_s3_uri"]
    # ... also when one instance group of several is an ml.* type
    groups = [{"instance_group_name": "a", "instance_type": "local", "instance_count": 1},
              {"instance_group_name": "b", "instance_type": "ml.c5.xlarge", "instance_count": 1}]
    rest = {k: v for k, v in args.items() if k not in ("instance_type", "instance_count")}
    assert "ml.c5.xlarge" in messages("pytorch", {**rest, "instance_groups": groups, "checkpoint_s3_uri": uri}).get(
        "checkpoint_s3_uri", "")


@pytest.mark.parametrize(("uri", "needle"), [("gs://bucket/ckpt", "unsupported scheme gs://"), ("file://",
                                                                                                "names no folder"),
                                             ("s3://Bad_Bucket/x", "lower-case bucket")])
def test_bad_checkpoint_uris_everywhere(args: dict[str, Any], uri: str, needle: str) -> None:
    errs = messages("pytorch", {**args, "instance_type": "local", "checkpoint_s3_uri": uri})
    assert list(errs) == ["checkpoint_s3_uri"] and needle in errs["checkpoint_s3_uri"]


def test_a_v3_jobs_value_is_measured_as_v3_sends_it(args: dict[str, Any]) -> None:
    """SDK v3 sends a string as it is (v2: JSON, quotes and \\u escapes included): 2,500 characters fit."""
    fits = {"ascii": "x" * 2500, "accents": "é" * 1000, "lines": "\n" * 1500, "number": 10 ** 2499}
    v3 = {**args, "hyperparameter_encoding": "v3"}
    assert problems("pytorch", {**v3, "hyperparameters": fits}) == []
    got = messages("pytorch", {**v3, "hyperparameters": {"long": "x" * 2501}})
    assert "2,501 characters as SDK v3 sends it; SageMaker allows at most 2,500" in got["hyperparameters.long"]
    assert set(messages("pytorch", {**args, "hyperparameters": fits})) == {  # v2's JSON text is longer
        "hyperparameters.ascii", "hyperparameters.accents", "hyperparameters.lines"}
