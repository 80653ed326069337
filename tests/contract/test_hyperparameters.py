from smdist_launcher.contract.hyperparameters import (
    decode_hyperparameters,
    encode_hyperparameters,
    split_hyperparameters,
    to_cmd_args,
)


def test_encode_matches_sdk_json_encoding():
    assert encode_hyperparameters({"lr": 0.1, "name": "x", "flag": True, "d": {"a": 1}}) == {
        "lr": "0.1", "name": '"x"', "flag": "true", "d": '{"a": 1}'}


def test_decode_keeps_raw_string_when_not_json():
    assert decode_hyperparameters({"a": '"s"', "b": "3", "c": "not json", "d": "[1, 2]"}) == {
        "a": "s", "b": 3, "c": "not json", "d": [1, 2]}


def test_split_user_framework_reserved():
    user, fw, reserved = split_hyperparameters({
        "epochs": 2, "sagemaker_program": "train.py", "sagemaker_mpi_enabled": True,
        "_tuning_objective_metric": "loss", "sagemaker_region": "us-west-2"})
    assert user == {"epochs": 2}
    assert fw == {"sagemaker_mpi_enabled": True}
    assert reserved == {"sagemaker_program": "train.py", "sagemaker_region": "us-west-2"}


def test_cmd_args_like_toolkit():
    assert to_cmd_args({"lr": 0.1, "batch-size": 128, "b": True, "n": None, "l": [1, 2], "d": {"y": 2, "x": 1}}) == [
        "-b", "True", "--batch-size", "128", "-d", "x=1,y=2", "-l", "[1, 2]", "--lr", "0.1", "-n", ""]
