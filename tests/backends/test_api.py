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


def test_the_run_policy_is_read_once_from_the_arguments(tmp_path: Path) -> None:
    """Every backend reads retries, monitoring and metric definitions from Submission.policy (typed), never through
    getattr on the arguments; a bare plan's policy is one attempt, no monitoring."""
    from smdist_launcher.backends.api import RunPolicy, Submission
    from smdist_launcher.backends.toolkit.resilience_plan import resilience_of

    (tmp_path / "train.py").write_text("print('hi')\n")
    est = PyTorch(entry_point="train.py", source_dir=str(tmp_path), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311", max_retry_attempts=3,
                  resilience={"retry_on": "any", "log_monitoring": [{"name": "step", "pattern": r"step (\d+)",
                                                                     "expected_every_s": 30}]},
                  metric_definitions=[{"Name": "loss", "Regex": r"loss (\S+)"}])
    submission = est.submission(est.plan())
    policy = submission.policy
    assert isinstance(policy, RunPolicy) and policy.max_retry_attempts == 3 and not policy.use_spot_instances
    assert policy.resilience.retry_on == "any" and submission.step_patterns == [r"step (\d+)"]
    assert submission.metric_definitions == [{"Name": "loss", "Regex": r"loss (\S+)"}]
    plan = resilience_of(policy)
    assert (plan.max_attempts, plan.retry_on, [m.name for m in plan.monitors]) == (3, "any", ["step"])
    bare = Submission(plan=submission.plan)
    assert bare.policy == RunPolicy() and resilience_of(bare.policy).max_attempts == 1


def test_the_run_policy_carries_max_run_run_as_and_faults(tmp_path: Path) -> None:
    """max_run and output compression from the arguments; run-as and faults (typed, checked against the job) from the
    backend's options, completed once by its dry run; serve gives a container-command request's policy."""
    from smdist_launcher.backends.api import RunPolicy, Submission
    from smdist_launcher.backends.local.backend import ProcessBackend
    from smdist_launcher.backends.toolkit.faults import Fault
    from smdist_launcher.errors import ValidationError

    (tmp_path / "train.py").write_text("print('hi')\n")
    est = PyTorch(entry_point="train.py", source_dir=str(tmp_path), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", max_run=600, disable_output_compression=True)
    submission = est.submission(est.plan())
    assert (submission.policy.max_run, submission.policy.disable_output_compression) == (600, True)
    assert (submission.policy.run_as, submission.policy.faults) == (None, ())
    dry = ProcessBackend().dryrun(submission, {"run_as": "nobody", "inject": ["kill-rank:1@5", "kill-host:algo-2@2"]})
    assert dry.submission.policy.run_as == "nobody"
    assert dry.submission.policy.faults == (Fault("kill-host", "algo-2", 2.0), Fault("kill-rank", "1", 5.0))
    with pytest.raises(ValidationError, match="process.inject"):
        ProcessBackend().dryrun(submission, {"inject": ["kill-host:algo-3@2"]})
    # a container-command request: serve gives the policy (serve/container_jobs.py), there are no settings
    policy = RunPolicy(metric_definitions=({"Name": "loss", "Regex": "loss (.*)"},), max_retry_attempts=2,
                       use_spot_instances=True)
    container = Submission(plan=submission.plan, policy=policy)
    assert container.settings is None and container.policy.max_retry_attempts == 2
    assert container.policy.use_spot_instances and container.metric_definitions == [{"Name": "loss",
                                                                                      "Regex": "loss (.*)"}]
    assert Submission(plan=submission.plan).policy.max_run == 600  # a bare plan's max_run: the plan's
