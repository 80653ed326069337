"""The resilience key's schema: regexes checked, one capture group at most, unique monitor names, bounded values."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from smdist_launcher.jobspec.resilience import Resilience


def test_defaults_retry_only_what_a_retry_can_cure() -> None:
    r = Resilience()
    assert r.retry_on == "curable" and r.process_restarts == 0 and r.log_monitoring == []


def test_monitors_are_checked() -> None:
    ok = Resilience.model_validate({"log_monitoring": [{"name": "step", "pattern": r"step (\d+)",
                                                         "expected_every_s": 60}]})
    assert ok.log_monitoring[0].captures_step
    for bad in ({"name": "s", "pattern": "step (", "expected_every_s": 1},
                {"name": "s", "pattern": r"(a)(b)", "expected_every_s": 1},
                {"name": "s", "pattern": "x", "expected_every_s": 0}):
        with pytest.raises(ValidationError):
            Resilience.model_validate({"log_monitoring": [bad]})
    with pytest.raises(ValidationError, match="unique"):
        Resilience.model_validate({"log_monitoring": [{"name": "a", "pattern": "x", "expected_every_s": 1}] * 2})


def test_process_restarts_only_where_ranks_can_restart_in_place(tmp_path) -> None:
    """torchrun on one host and one process per host restart in place; mpirun-based launchers and torchrun across
    hosts need a whole-job restart, said with the key path before anything starts."""
    from smdist_launcher import PyTorch
    from smdist_launcher.errors import ValidationError as Invalid

    (tmp_path / "train.py").write_text("")
    base = dict(entry_point="train.py", source_dir=str(tmp_path), instance_type="local", framework_version="2.3",
                py_version="py311", resilience={"process_restarts": 2})
    torchrun = {"torch_distributed": {"enabled": True}}
    PyTorch(instance_count=1, distribution=torchrun, **base)
    PyTorch(instance_count=3, **base)  # no distribution: every host's process restarts on its own
    for count, distribution, words in ((2, torchrun, "across 2 hosts"),
                                       (1, {"mpi": {"enabled": True}}, "the mpi launcher")):
        with pytest.raises(Invalid) as info:
            PyTorch(instance_count=count, distribution=distribution, **base)
        [error] = [e for e in info.value.errors if e.path == "resilience.process_restarts"]
        assert words in error.message and "max_retry_attempts" in error.message


def test_the_estimator_takes_resilience_and_sagemaker_refuses_what_it_cannot_express(tmp_path) -> None:
    from smdist_launcher import PyTorch
    from smdist_launcher.errors import ValidationError as Invalid

    (tmp_path / "train.py").write_text("")
    kwargs = dict(entry_point="train.py", source_dir=str(tmp_path), instance_count=2, framework_version="2.3",
                  py_version="py311", role="arn:aws:iam::111122223333:role/R", max_retry_attempts=3)
    monitor = {"log_monitoring": [{"name": "step", "pattern": r"step (\d+)", "expected_every_s": 60}]}
    local = PyTorch(instance_type="local", resilience=monitor, **kwargs)
    assert local.spec.resilience is not None and local.spec.resilience.log_monitoring[0].name == "step"
    with pytest.raises(Invalid) as info:
        PyTorch(instance_type="ml.c5.xlarge", resilience={**monitor, "retry_on": "any"}, **kwargs).request()
    assert sorted(e.path for e in info.value.errors) == ["resilience.log_monitoring", "resilience.retry_on"]
    request = PyTorch(instance_type="ml.c5.xlarge", **kwargs).request()
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 3}
    assert "SMDIST_RESILIENCE" not in request["Environment"]
    # our image runs smdist-train, which watches the lines itself: the monitors travel in the request's Environment
    ours = PyTorch(instance_type="ml.c5.xlarge", resilience=monitor, image_uri="123.dkr.ecr.us-east-1.amazonaws.com/"
                   "smdist-train:latest", **kwargs).request()
    from smdist_launcher.container.host_resilience import decode

    assert decode(ours["Environment"]["SMDIST_RESILIENCE"]).monitors[0].pattern == r"step (\d+)"
