"""SDK v3's hyperparameter rules (contract/v3_hyperparameters.py); tests/plan/test_v3_encoding.py checks them against
the official v3 drivers."""
from __future__ import annotations

from smdist_launcher.contract import v3_hyperparameters as v3


def test_strings_travel_raw_and_everything_else_as_json() -> None:
    assert v3.encode({"s": "Hello World", "b": True, "l": [1, 2], "n": None, "o": object}) == {
        "s": "Hello World", "b": "true", "l": "[1, 2]", "n": "null", "o": str(object)}
    assert v3.decode({"s": "Hello World", "b": "true", "q": '"q"', "i": "1"}) == {
        "s": "Hello World", "b": True, "q": "q", "i": 1}


def test_arguments_keep_the_order_and_always_take_two_dashes() -> None:
    decoded = v3.decode(v3.encode({"z": 1, "a": {"k": True}, "flag": False, "s": "x y"}))
    assert v3.cli_args(decoded) == ["--z", "1", "--a", '{"k": true}', "--flag", "false", "--s", "x y"]


def test_environment_names_take_underscores_and_sm_hps_holds_all() -> None:
    assert v3.env_vars({"learning-rate": 0.1, "name": "n"}) == {
        "SM_HP_LEARNING_RATE": "0.1", "SM_HP_NAME": "n", "SM_HPS": '{"learning-rate": 0.1, "name": "n"}'}
