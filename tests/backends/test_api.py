"""The backend interface (backends/api.py): a toy backend written against it runs jobs through fit() and the CLI;
every built-in backend's dry run is pinned next to an example."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends import registry
from smdist_launcher.backends.api import JobState
from smdist_launcher.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPT = """import os, sys
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write(
    os.environ["TOY_GREETING"] + " " + " ".join(sys.argv[1:]))
print("trained")
"""


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    registry.register("toy", "backends.toy_backend:ToyBackend", "a toy backend of the tests")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    yield tmp_path
    registry.unregister("toy")


def test_a_toy_backend_runs_a_job_through_fit(toy: Path) -> None:
    est = PyTorch(entry_point="train.py", source_dir=str(toy / "src"), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311", hyperparameters={"epochs": 3})
    dry = est.dryrun(backend="toy", greeting="hi")
    assert dry.content == {"greeting": "hi", "run": ["python", "train.py", "--epochs", "3"]}
    job = est.fit(backend="toy", job_name="toy-fit", jobs_root=str(toy / "jobs"), greeting="hi")
    assert est.latest_job is job and est.model_data == job.model_data
    assert (toy / "jobs" / "toy-fit" / "model" / "model.txt").read_text() == "hi --epochs 3"
    status = registry.get("toy").describe(job.handle)
    assert status.state is JobState.COMPLETED and status.is_terminal
    assert str(job.handle) == f"toy://{toy / 'jobs'}/toy-fit"


def test_a_toy_backend_runs_a_job_through_the_cli(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = toy / "job.yaml"
    job.write_text("framework: pytorch\nentry_point: train.py\nsource_dir: src\ninstance_type: local\n"
                   "instance_count: 1\nframework_version: '2.3'\npy_version: py311\n")
    assert main(["plan", str(job), "--dryrun", "--backend", "toy", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == ["python", "train.py"]
    assert main(["run", str(job), "--backend", "toy", "--job-name", "toy-cli", "--jobs-dir", str(toy / "jobs"),
                 "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("toy-cli Completed file://")
    assert (toy / "jobs" / "toy-cli" / "output.log").read_text() == "trained\n"


def test_bad_backend_options_name_every_key_before_anything_runs(toy: Path) -> None:
    from smdist_launcher.errors import ValidationError

    est = PyTorch(entry_point="train.py", source_dir=str(toy / "src"), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    with pytest.raises(ValidationError) as info:
        est.fit(backend="toy", jobs_root=str(toy / "jobs"), greeting=3, colour="red")
    assert sorted(e.path for e in info.value.errors) == ["toy.colour", "toy.greeting"]
    assert not (toy / "jobs").exists()
    with pytest.raises(ValidationError) as slurm:
        est.dryrun(backend="slurm", time="soon")
    assert [e.path for e in slurm.value.errors] == ["slurm.time"]


@pytest.mark.parametrize(("backend", "job", "pinned", "extra"), [
    ("process", "mnist/job_torch_distributed.yaml", "mnist/plans/dryrun-process.yaml", []),
    ("netns", "mnist/job_torch_distributed.yaml", "mnist/plans/dryrun-netns.yaml", []),
    ("docker", "mnist/job_torch_distributed.yaml", "mnist/plans/dryrun-docker.yaml", []),
    ("slurm", "mpi/job.yaml", "mpi/plans/job.sbatch", []),
    ("sagemaker", "mpi/job.yaml", "mpi/plans/request.json", ["--region", "us-west-2"]),
])
def test_every_backend_dry_run_is_pinned(backend: str, job: str, pinned: str, extra: list[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMDIST_DOCKER_IMAGE", raising=False)
    assert main(["plan", str(EXAMPLES / job), "--dryrun", "--backend", backend, *extra,
                 "--check", str(EXAMPLES / pinned)]) == 0


def test_job_states_have_one_definition_of_terminal() -> None:
    from smdist_launcher.backends.sagemaker.status import is_terminal
    from smdist_launcher.backends.toolkit.records import FINAL_STATUSES

    assert {s.value for s in JobState if s.is_terminal} == set(FINAL_STATUSES)
    assert not JobState.STOPPING.is_terminal and not JobState.IN_PROGRESS.is_terminal
    assert is_terminal({"TrainingJobStatus": "Stopped"}) and not is_terminal({"TrainingJobStatus": "Stopping"})
