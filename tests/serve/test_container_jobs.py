"""serve/container_jobs.py: which requests are container-command jobs, and what the process backend refuses."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.serve.container_jobs import container_plan, is_container_command, runnable_problems
from smdist_launcher.serve.jobs import Settings


def _request(**extra: object) -> dict[str, object]:
    return {"TrainingJobName": "j", "AlgorithmSpecification": {
        "TrainingImage": "img", "TrainingInputMode": "File", "ContainerEntrypoint": ["/bin/bash"],
        "ContainerArguments": ["-c", "true"]},
        "ResourceConfig": {"InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
            {"InstanceGroupName": "train", "InstanceType": "ml.m5.xlarge", "InstanceCount": 2}]},
        "HyperParameters": {"epochs": "2"}, **extra}


def test_a_v2_request_with_an_entry_point_keeps_the_v2_path() -> None:
    assert is_container_command(_request())
    assert not is_container_command(_request(HyperParameters={"sagemaker_submit_directory": '"s3://b/c.tar.gz"'}))


def test_heterogeneous_requests_run_the_command_on_every_group() -> None:
    plan = container_plan(_request())
    assert plan.host_names == ["algo-1", "algo-2", "algo-3"] and plan.instance_groups is not None
    assert all(g.distribution for g in plan.instance_groups)


def test_process_hosts_without_a_private_opt_ml_are_refused(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    plan = container_plan(_request())
    monkeypatch.setenv("SMDIST_HOST_ISOLATION", "off")
    problems = runnable_problems(plan, Settings(jobs_dir=tmp_path, backend="process"))
    assert any("private /opt/ml" in p.message and "SMDIST_HOST_ISOLATION=off" in p.message for p in problems)
    assert runnable_problems(plan, Settings(jobs_dir=tmp_path, backend="netns")) == []


def test_a_container_command_job_keeps_its_retry_strategy_and_metric_definitions() -> None:
    from smdist_launcher.backends.toolkit.resilience_plan import resilience_of
    from smdist_launcher.serve.container_jobs import container_submission

    request = _request(RetryStrategy={"MaximumRetryAttempts": 3}, EnableManagedSpotTraining=True)
    request["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]  # type: ignore[index]
    submission = container_submission(container_plan(request), request)
    plan = resilience_of(submission.policy)
    assert (plan.max_attempts, plan.use_spot, plan.retry_on) == (3, True, "curable")
    assert submission.metric_definitions == [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
    assert submission.settings is None and submission.policy.max_run == submission.plan.max_run
    assert resilience_of(container_submission(container_plan(_request())).policy).max_attempts == 1


def test_container_jobs_and_jobs_import_one_way() -> None:
    """jobs.py uses container_jobs.py, never the other way round, not even lazily or for types (the settings both
    read live in settings.py): no import circle."""
    import ast

    import smdist_launcher.serve.container_jobs as module

    tree = ast.parse(Path(str(module.__file__)).read_text())
    imported = {f"{'.' * node.level}{node.module or ''}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {".jobs", "smdist_launcher.serve.jobs"} & imported, sorted(imported)
