"""The estimator: validation at construction, SageMaker-like attributes, plan() / fit(dry_run) / fit()."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from smdist_launcher import PyTorch, TensorFlow, ValidationError
from smdist_launcher.estimators import Framework, HuggingFace, MXNet, estimator_from_job_file
from smdist_launcher.jobspec import resolve
from smdist_launcher.plan.model import LaunchPlan
from smdist_launcher.plan.planner import build_plan


@pytest.fixture()
def code_dir(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("")
    return tmp_path


@pytest.fixture()
def kwargs(code_dir: Path) -> dict[str, Any]:
    return dict(entry_point="train.py", source_dir=str(code_dir), role="arn:aws:iam::111122223333:role/Train",
                instance_type="ml.p4d.24xlarge", instance_count=2, framework_version="2.3", py_version="py311",
                hyperparameters={"epochs": 2, "lr": 0.1}, distribution={"torch_distributed": {"enabled": True}})


def test_attributes_like_sagemaker(kwargs: dict[str, Any], code_dir: Path) -> None:
    est = PyTorch(**kwargs)
    assert (est.instance_count, est.instance_type, est.entry_point, est.role) == (
        2, "ml.p4d.24xlarge", "train.py", "arn:aws:iam::111122223333:role/Train")
    assert est.distribution == {"torch_distributed": {"enabled": True}}
    assert est.output_path is None and est.source_dir == str(code_dir)
    assert est.entry_point_path == str(code_dir / "train.py")
    assert est.model_data is None and est.latest_job is None
    with pytest.raises(AttributeError):
        est.not_an_argument  # noqa: B018


def test_entry_point_positional(kwargs: dict[str, Any]) -> None:
    entry = kwargs.pop("entry_point")
    assert PyTorch(entry, **kwargs).entry_point == entry


def test_invalid_arguments_raise_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "instance_cout": 2, "distribution": {"torch_distributed": {"enabled": True},
                                                                  "mpi": {"enabled": True}}})
    assert sorted(e.path for e in info.value.errors) == ["distribution.mpi.enabled", "instance_cout"]


def test_plan_is_pure_and_deterministic(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    plan = est.plan()
    assert isinstance(plan, LaunchPlan)
    assert plan.to_json() == est.plan().to_json()
    assert plan == build_plan(resolve(est.spec), {})
    assert (plan.job_name, plan.world_size, plan.launcher) == ("pytorch-training", 16, "torchrun")


def test_fit_dry_run_returns_the_same_plan(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    plan = est.fit("s3://bucket/train", dry_run=True)
    assert plan == est.plan("s3://bucket/train")
    assert plan.channels["training"].uri == "s3://bucket/train"
    assert est.latest_job is None


def test_plan_inputs_are_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        PyTorch(**kwargs).plan({"train": "file://data"})
    assert [e.path for e in info.value.errors] == ["inputs.train.uri"]


@pytest.mark.parametrize("backend, changes, inputs, model_data", [
    ("process", {"instance_type": "local"}, "file://data", "file:///jobs/model.tar.gz"),
    # routing only; tests/backends/sagemaker/ runs that backend against a moto server
    ("sagemaker", {}, "s3://bucket/train", "s3://bucket/job/output/model.tar.gz"),
])
def test_fit_runs_the_plan_through_its_backend(kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, backend: str,
                                               changes: dict[str, Any], inputs: str, model_data: str,
                                               tmp_path: Path) -> None:
    from smdist_launcher.backends import registry

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()  # local fit() checks that a relative data folder exists (here, not the checkout's)
    chosen = registry.get(backend)
    seen: dict[str, Any] = {}

    class Result:
        pass

    def submit(dry: Any, *, wait: bool, logs: Any, jobs_root: Any) -> Result:
        seen.update(dry=dry, wait=wait, logs=logs)
        result = Result()
        result.model_data = model_data  # type: ignore[attr-defined]
        return result

    monkeypatch.setattr(type(chosen), "dryrun", lambda self, submission, options: SimpleNamespace(
        submission=submission), raising=True)
    monkeypatch.setattr(type(chosen), "submit", lambda self, dry, **kw: submit(dry, **kw), raising=True)
    est = PyTorch(**{**kwargs, **changes, "base_job_name": "demo"})
    result = est.fit(inputs, wait=False)
    submission = seen["dry"].submission
    assert submission.settings is est.spec and seen["wait"] is False  # the backend sees the arguments, not est
    plan = submission.plan
    assert plan.job_name.startswith("demo-2") and len(plan.job_name) == len("demo-2024-05-01-12-34-56-789")
    assert est.latest_job is result and est.model_data == model_data


def test_hyperparameters_are_what_sagemaker_writes(kwargs: dict[str, Any]) -> None:
    hps = PyTorch(**kwargs).hyperparameters()
    assert hps["epochs"] == "2" and hps["lr"] == "0.1"
    assert all(isinstance(v, str) for v in hps.values())


def test_set_hyperparameters_revalidates(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**kwargs)
    est.set_hyperparameters(batch_size=64)
    assert est.spec.hyperparameters == {"epochs": 2, "lr": 0.1, "batch_size": 64}
    with pytest.raises(ValidationError):
        est.set_hyperparameters(sagemaker_program="x")


def test_each_framework_class(kwargs: dict[str, Any]) -> None:
    dist = {"parameter_server": {"enabled": True}}
    assert TensorFlow(**{**kwargs, "framework_version": "2.13", "distribution": dist}).plan().framework == "tensorflow"
    assert MXNet(**{**kwargs, "framework_version": "1.9", "distribution": dist}).plan().framework == "mxnet"
    hf = {k: v for k, v in kwargs.items() if k != "framework_version"}
    assert HuggingFace(**hf, transformers_version="4.36", pytorch_version="2.1").plan().framework == "huggingface"
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"
    assert Framework(**{**kwargs, "image_uri": image}).plan().framework == "framework"


def test_from_job_file(code_dir: Path) -> None:
    path = code_dir / "job.yaml"
    path.write_text(textwrap.dedent("""\
        framework: pytorch
        entry_point: train.py
        source_dir: .
        instance_type: local
        instance_count: 2
        framework_version: "2.3"
        py_version: py311
        distribution: {torch_distributed: {enabled: true}, mpi: {processes_per_host: 2}}
        inputs: {training: data}
    """))
    est = estimator_from_job_file(str(path))
    assert isinstance(est, PyTorch) and est.source_dir_path == str(code_dir)
    plan = est.plan()
    assert plan.source_dir == "." and plan.world_size == 4
    assert plan.channels["training"].uri == f"file://{code_dir}/data"
    assert PyTorch.from_job_file(str(path), overrides={"instance_count": 1}).plan().world_size == 2
    est.set_hyperparameters(epochs=3)
    assert est.plan().hyperparameters == {"epochs": 3}
    with pytest.raises(ValidationError) as info:
        TensorFlow.from_job_file(str(path))
    assert [e.path for e in info.value.errors] == ["framework"]


def test_import_is_light() -> None:
    code = ("import sys, smdist_launcher; from smdist_launcher import PyTorch; "
            "print(sorted(m for m in ('torch', 'boto3', 'sagemaker', 'yaml', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_estimator_from_job_file_is_a_lazy_top_level_export() -> None:
    code = ("import sys, smdist_launcher; light = 'pydantic' not in sys.modules; "
            "from smdist_launcher import estimator_from_job_file; "
            "from smdist_launcher.estimators import estimator_from_job_file as direct; "
            "print(light, estimator_from_job_file is direct, 'estimator_from_job_file' in smdist_launcher.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "True True True"


def test_request_is_the_create_training_job_call_without_secrets(kwargs: dict[str, Any]) -> None:
    est = PyTorch(**{**kwargs, "environment": {"WANDB_API_KEY": "k-123", "MODE": "fast"}, "base_job_name": "demo"})
    request = est.request("s3://bucket/train", region="us-west-2")
    assert request["TrainingJobName"] == "demo"
    assert request["HyperParameters"] == {
        **est.plan("s3://bucket/train").sagemaker_hyperparameters,
        "sagemaker_submit_directory": '"s3://sagemaker-us-west-2-<account>/demo/source/sourcedir.tar.gz"',
        "sagemaker_region": '"us-west-2"'}
    assert request["Environment"]["MODE"] == "fast" and "k-123" not in str(request)
    assert request["InputDataConfig"][0]["ChannelName"] == "training"
    assert est.request(job_name="given")["TrainingJobName"] == "given"
    # the estimator's own region is the default
    regional = PyTorch(**{**kwargs, "region": "eu-central-1"}).request()
    assert regional["HyperParameters"]["sagemaker_region"] == '"eu-central-1"'


def test_request_refuses_jobs_sagemaker_cannot_run(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        PyTorch(**{**kwargs, "instance_type": "local"}).request()
    assert [e.path for e in info.value.errors] == ["instance_type"]
    with pytest.raises(ValidationError) as info:
        PyTorch(**kwargs).request(region="moon")
    assert [e.path for e in info.value.errors] == ["region"]


@pytest.mark.parametrize(("model_dir", "expected"), [
    ("s3://bucket/models", "s3://bucket/models"),
    (None, "s3://bucket/out/tf-job/model"),      # the SDK default under output_path
    (False, None),                               # no model_dir hyperparameter at all
])
def test_tensorflow_model_dir_reaches_the_plan(kwargs: dict[str, Any], model_dir: Any, expected: str | None) -> None:
    tf = {**kwargs, "framework_version": "2.13", "py_version": "py310", "hyperparameters": {},
          "distribution": {"multi_worker_mirrored_strategy": {"enabled": True}}, "output_path": "s3://bucket/out"}
    if model_dir is not None:
        tf["model_dir"] = model_dir
    est = TensorFlow(**{**tf, "base_job_name": "tf-job"})
    plan = est.plan()
    assert plan.hyperparameters.get("model_dir") == expected
    assert est.hyperparameters().get("model_dir") == (None if expected is None else f'"{expected}"')
