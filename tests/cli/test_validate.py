from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.cli.main import main


def test_valid_job_exits_0(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(job_file)]) == 0
    assert capsys.readouterr().out.startswith(f"{job_file}: ok: pytorch torch_distributed, 2 × local")


def test_one_line_per_problem_exits_2(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text().replace("instance_count: 2", "instance_count: 0")
                        .replace("torch_distributed:\n    enabled: true",
                                 "mpi:\n    enabled: true\n    processes_per_host: 0"))
    assert main(["validate", str(job_file)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"{job_file}: instance_count: must be ≥ 1, got 0",
                     f"{job_file}: distribution.mpi.processes_per_host: must be ≥ 1, got 0"]


@pytest.mark.parametrize("text", ["framework: [unclosed", "- just\n- a list\n"])
def test_unparseable_file_exits_2(job_file: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(text)
    assert main(["validate", str(job_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{job_file}: ") and len(err.splitlines()) == 1


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["validate", str(missing)]) == 2
    assert capsys.readouterr().err.startswith(f"{missing}: ")


def test_warnings_are_printed_but_exit_0(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text().replace("instance_type: local", "instance_type: ml.g5.2xlarge")
                        .replace("torch_distributed:\n    enabled: true",
                                 "mpi:\n    enabled: true\n    processes_per_host: 4"))
    assert main(["validate", str(job_file)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"{job_file}: warning: distribution.mpi.processes_per_host: ")


def test_missing_input_folder_fails_validate_not_run(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text() + "inputs:\n  training: data/train\n  test: file://data/test\n")
    assert main(["validate", str(job_file)]) == 2
    err = capsys.readouterr().err.splitlines()
    folder = job_file.parent
    assert err[0] == f"{job_file}: inputs.training.uri: {folder}/data/train does not exist; create it or fix the path"
    assert err[1].startswith(f"{job_file}: inputs.test.uri: {folder}/data/test does not exist "
                             "(file://data/test is the path")
    assert main(["plan", str(job_file)]) == 0    # a plan is pure: pinned plans are checked where the data is absent
    (folder / "data" / "train").mkdir(parents=True)
    (folder / "data" / "test").mkdir()
    capsys.readouterr()
    assert main(["validate", str(job_file)]) == 0


_GROUPS = """instance_groups:
  - {instance_group_name: data, instance_type: local, instance_count: 1}
  - {instance_group_name: train, instance_type: local, instance_count: 2}
"""


def test_instance_groups_are_shown_and_a_local_cluster_is_not_submitted(job_file: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text().replace("instance_type: local\ninstance_count: 2\n", _GROUPS)
                        .replace("    enabled: true\n", "    enabled: true\n  instance_groups: [train]\n"))
    assert main(["validate", str(job_file)]) == 0
    assert capsys.readouterr().out.startswith(f"{job_file}: ok: pytorch torch_distributed, data: 1 × local, "
                                              "train: 2 × local (distribution), ")
    assert main(["submit", str(job_file)]) == 2
    assert "'local' runs on this machine; use `smdist run`" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_tag_without_a_valid_value_exits_2_naming_the_key(command: str, job_file: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # `!!int` with nothing after it made PyYAML raise IndexError: a traceback and exit 1 (issue 18)
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    job_file.write_text(job_file.read_text().replace("instance_count: 2", "instance_count: !!int")
                        .replace("epochs: 2", "epochs: 2\n  lr: !!float\n  fast: !!bool maybe"))
    assert main([command, str(job_file)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{job_file}: instance_count: an empty value is not an integer (!!int); write an integer (e.g. !!int 2), "
        "remove the tag, or quote the value to keep it as text",
        f"{job_file}: hyperparameters.lr: an empty value is not a number (!!float); write a number "
        "(e.g. !!float 0.5), remove the tag, or quote the value to keep it as text",
        f"{job_file}: hyperparameters.fast: 'maybe' is not true or false (!!bool); write true or false "
        "(e.g. !!bool true), remove the tag, or quote the value to keep it as text"]
    assert not (tmp_path / "jobs").exists()  # nothing started
