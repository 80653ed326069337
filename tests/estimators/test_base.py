"""The estimator: validation at construction, SageMaker-like attributes, plan() / fit(dry_run) / fit()."""
from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher import PyTorch, TensorFlow, ValidationError
from smdist_launcher.estimators import Framework, HuggingFace, MXNet, estimator_from_job_file
from smdist_launcher.plan.model import LaunchPlan
from smdist_launcher.plan.planner import build_plan
from smdist_launcher.spec import resolve


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
        PyTorch(**{**kwargs, "instance_cout": 2, "distribution": {"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}}})
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
    ("local", {"instance_type": "local"}, "file://data", "file:///jobs/model.tar.gz"),
    # routing only; tests/backends/sagemaker/ runs that backend against a moto server
    ("sagemaker", {}, "s3://bucket/train", "s3://bucket/job/output/model.tar.gz"),
])
def test_fit_runs_the_plan_through_its_backend(kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, backend: str,
                                               changes: dict[str, Any], inputs: str, model_data: str) -> None:
    module = importlib.import_module(f"smdist_launcher.backends.{backend}")
    seen: dict[str, Any] = {}

    class Result:
        pass

    def run_job(plan: LaunchPlan, *, estimator: Any, wait: bool, logs: Any) -> Result:
        seen.update(plan=plan, estimator=estimator, wait=wait, logs=logs)
        result = Result()
        result.model_data = model_data  # type: ignore[attr-defined]
        return result

    monkeypatch.setattr(module, "run_job", run_job, raising=False)
    est = PyTorch(**{**kwargs, **changes, "base_job_name": "demo"})
    result = est.fit(inputs, wait=False)
    assert seen["estimator"] is est and seen["wait"] is False
    assert seen["plan"].job_name.startswith("demo-2") and len(seen["plan"].job_name) == len("demo-2024-05-01-12-34-56-789")
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
