from __future__ import annotations

import json

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.plan.hyperparameters import env_value, json_encode, script_hyperparameters, to_cmd_args


def test_sorted_keys_and_dash_rules() -> None:
    assert to_cmd_args({"lr": 0.1, "batch-size": 128, "b": 3}) == ["-b", "3", "--batch-size", "128", "--lr", "0.1"]


@pytest.mark.parametrize(("value", "token"), [
    (True, "True"),
    (False, "False"),
    (None, ""),
    ([1, 2], "[1, 2]"),
    ((1, 2), "[1, 2]"),          # JSON round trip: tuples arrive as lists
    ({"b": 2, "a": True}, "a=True,b=2"),
    ({"x": None}, "x=None"),     # dict members go through "%s" formatting, not _decode
    (1e-05, "1e-05"),
    ("0.1", "0.1"),
    ("a b;c $(rm -rf /) 'q' \"dq\"\nnext", "a b;c $(rm -rf /) 'q' \"dq\"\nnext"),
])
def test_values_as_the_toolkit_formats_them(value: object, token: str) -> None:
    assert to_cmd_args({"key": value}) == ["--key", token]


def test_unserialisable_value_names_the_key() -> None:
    with pytest.raises(ValidationError) as info:
        to_cmd_args({"ok": 1, "bad": {1, 2}})
    assert [e.path for e in info.value.errors] == ["hyperparameters.bad"]


def test_json_encoding_matches_hyperparameters_json() -> None:
    encoded = json_encode({"epochs": 2, "name": "x", "flag": True, "mp": {"b": 1, "a": 2}})
    assert encoded == {"epochs": "2", "name": '"x"', "flag": "true", "mp": '{"a": 2, "b": 1}'}
    assert json.loads(encoded["name"]) == "x"


def test_env_encoding() -> None:
    assert env_value("x") == "x"
    assert env_value(None) == ""
    assert env_value({"b": [1, 2], "a": True}) == '{"a":true,"b":[1,2]}'


def test_framework_keys_are_not_script_args() -> None:
    hps = {"epochs": 1, "sagemaker_program": "t.py", "_tuning_objective_metric": "loss"}
    assert script_hyperparameters(hps) == {"epochs": 1}
