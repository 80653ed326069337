"""The one definition of a secret, and every rendering of a plan (CLI formats, pins, host files) keeping them out."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smdist_launcher.cli.main import main
from smdist_launcher.contract import write_host_config
from smdist_launcher.contract.secrets import (
    REDACTED,
    decode_secret_env,
    encode_secret_env,
    is_secret_key,
    redact_argv,
    restore_argv,
)

SECRET = "hf-VeRy-SeCrEt-1"


@pytest.mark.parametrize("key", ["HF_TOKEN", "hub_token", "apiKey", "api_key", "WANDB_API_KEY", "db_password",
                                 "SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "private_key",
                                 "credentials", "SM_HP_HUB_TOKEN"])
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "TOKENIZERS_PARALLELISM", "sort_key", "key_size", "epochs", "PWD",
                                 "tokenizer_name", "monkey"])
def test_not_secret_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_argv_round_trip() -> None:
    argv = ["python", "train.py", "--api_key", "k1", "--epochs", "2", "-k", "short"]
    shown = redact_argv(argv, ["api_key", "epochs", "k"])
    assert shown == ["python", "train.py", "--api_key", REDACTED, "--epochs", "2", "-k", "short"]
    assert restore_argv(shown, {"api_key": "k1"}) == argv
    assert decode_secret_env(encode_secret_env({"api_key": '"k1"', "epochs": "2"})) == {"api_key": '"k1"'}
    assert decode_secret_env("not json") == {} and decode_secret_env('{"epochs": "2"}') == {}


JOB = f"""\
framework: pytorch
job_name: secret-test
entry_point: train.py
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
hyperparameters: {{hub_token: {SECRET}, epochs: 2}}
distribution: {{mpi: {{enabled: true, processes_per_host: 2}}}}
"""


def test_cli_plan_never_prints_secret_hyperparameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    for extra in ([], ["--format", "json"], ["--format", "yaml"], ["--host", "algo-1"],
                  ["--host", "algo-1", "--format", "json"]):
        assert main(["plan", str(job), *extra]) == 0, extra
        out = capsys.readouterr().out
        assert SECRET not in out and REDACTED in out, extra
    for pin in ("p.json", "p.yaml"):
        assert main(["plan", str(job), "--write", str(tmp_path / pin)]) == 0
        assert SECRET not in (tmp_path / pin).read_text()
        assert main(["plan", str(job), "--check", str(tmp_path / pin)]) == 0


def test_host_files_hold_the_marker(tmp_path: Path) -> None:
    from smdist_launcher import PyTorch

    (tmp_path / "train.py").write_text("")
    est = PyTorch(entry_point="train.py", source_dir=str(tmp_path), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", hyperparameters={"api_key": SECRET, "lr": 0.1},
                  distribution={"torch_distributed": {"enabled": True}})
    plan = est.plan()
    assert SECRET in " ".join(plan.hosts[0].argv)  # the model itself keeps the value: the launcher needs it
    # even a revealed plan dict does not reach the host's files
    paths = write_host_config(tmp_path / "ml", plan.to_dict(reveal_secrets=True), "algo-1")
    for f in (paths.plan_file, paths.hyperparameters_file):
        assert SECRET not in f.read_text(), f
    assert json.loads(json.loads(paths.hyperparameters_file.read_text())["api_key"]) == REDACTED


@pytest.mark.parametrize("argv", [
    # SDK v3 keeps the user's order; v2 sorts (a_note before hub_token): a value that reads like the secret's flag
    ["python", "train.py", "--note", "--hub_token", "--hub_token", SECRET, "--lr", "0.1"],
    ["python", "train.py", "--a_note", "--hub_token", "--hub_token", SECRET, "-x", "--hub_token"],
])
def test_a_value_that_reads_like_a_secret_flag_neither_shows_nor_takes_the_secret(argv: list[str]) -> None:
    keys = ["note", "a_note", "hub_token", "lr", "x"]
    shown = redact_argv(argv, keys)
    assert SECRET not in shown  # before: the flag-like value was redacted and the secret after it shown
    assert shown[3] == "--hub_token" and shown[5] == REDACTED
    assert restore_argv(shown, {"hub_token": SECRET}) == argv  # before: the script got the secret for --note
