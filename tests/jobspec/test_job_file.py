from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import load_job_file, resolve
from smdist_launcher.jobspec.job_file import job_file_model

JOB = """\
framework: pytorch
entry_point: train.py
source_dir: src
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
hyperparameters: {epochs: 1}
distribution:
  torch_distributed: {enabled: true}
  mpi: {processes_per_host: 2}
inputs:
  training: data/train
  test: {uri: "s3://bucket/test", input_mode: FastFile}
"""


@pytest.fixture()
def job_dir(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    return tmp_path


def _write(folder: Path, text: str) -> Path:
    path = folder / "job.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _paths(path: Path) -> list[str]:
    with pytest.raises(ValidationError) as info:
        load_job_file(path)
    assert info.value.source == str(path)
    return sorted(e.path for e in info.value.errors)


def test_load_resolves_paths_against_the_file(job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    job = load_job_file(_write(job_dir, JOB))
    assert job.framework == "pytorch" and job.args.source_dir == "src"
    assert job.args.source_dir_path == str(job_dir / "src")
    assert job.inputs["training"].uri == f"file://{job_dir}/data/train"
    assert job.inputs["test"].input_mode == "FastFile"
    resolved = resolve(job)
    assert (resolved.strategy, resolved.processes_per_host, resolved.source_dir, resolved.network_interface) == (
        "torch_distributed", 2, "src", "lo")


def test_all_problems_of_the_file(job_dir: Path) -> None:
    text = JOB.replace("framework: pytorch", "framework: pytorch\njob_name: bad_name\nsagemaker_session: x") \
              .replace("instance_count: 2", "instance_count: 0").replace("training: data/train", "training: http://x")
    assert _paths(_write(job_dir, text)) == ["inputs.training.uri", "instance_count", "job_name", "sagemaker_session"]


def test_framework_required_and_checked(job_dir: Path) -> None:
    assert _paths(_write(job_dir, JOB.replace("framework: pytorch\n", ""))) == ["framework"]
    assert _paths(_write(job_dir, JOB.replace("framework: pytorch", "framework: pytroch"))) == ["framework"]


def test_misspelled_framework_does_not_hide_the_other_problems(job_dir: Path) -> None:
    # the arguments are checked as the framework it most likely means (pytorch)
    text = JOB.replace("framework: pytorch", "framework: pytroch").replace("instance_count: 2", "instance_count: 0")
    assert _paths(_write(job_dir, text)) == ["framework", "instance_count"]
    # no likely meaning: only the framework is reported (any other model would report made-up problems)
    assert _paths(_write(job_dir, text.replace("framework: pytroch", "framework: jax"))) == ["framework"]


def test_yaml_problems(job_dir: Path) -> None:
    assert _paths(_write(job_dir, "framework: [unclosed\n")) == ["<root>"]
    assert _paths(_write(job_dir, "- a list\n")) == ["<root>"]
    dup = _write(job_dir, JOB + "instance_count: 4\n")
    with pytest.raises(ValidationError, match="duplicate key 'instance_count'"):
        load_job_file(dup)
    with pytest.raises(ValidationError, match="cannot read the job file"):
        load_job_file(job_dir / "missing.yaml")


def test_overrides_are_merged_before_validation(job_dir: Path) -> None:
    job = load_job_file(_write(job_dir, JOB), overrides={"instance_count": 3,
                                                         "distribution": {"mpi": {"processes_per_host": 1}}})
    assert job.args.instance_count == 3
    assert job.args.distribution is not None and job.args.distribution.normalized() == {
        "torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 1}}


def test_job_name_from_file(job_dir: Path) -> None:
    job = load_job_file(_write(job_dir, "job_name: nightly-1\n" + JOB))
    assert resolve(job).job_name == "nightly-1"
    assert resolve(job, job_name="other").job_name == "other"


def test_schema_model_has_the_job_file_keys() -> None:
    model = job_file_model("pytorch")
    assert {"framework", "inputs", "job_name", "entry_point", "distribution"} <= set(model.model_fields)
    assert model.model_json_schema()["properties"]["framework"]["const"] == "pytorch"


def test_a_misspelt_job_file_key_is_named(job_dir: Path) -> None:
    path = _write(job_dir, JOB.replace("inputs:", "input:"))
    with pytest.raises(ValidationError) as info:
        load_job_file(path)
    assert [str(e) for e in info.value.errors] == ["input: unknown key; did you mean 'inputs'?"]
