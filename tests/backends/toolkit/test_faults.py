"""--inject FAULT@SECONDS: parsed and checked against the job before anything starts."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.toolkit.faults import Fault, check_targets, parse_fault


def test_each_fault_kind_parses() -> None:
    assert parse_fault("kill-host:algo-2@30") == Fault("kill-host", "algo-2", 30.0)
    assert parse_fault("kill-rank:3@4.5") == Fault("kill-rank", "3", 4.5)
    assert parse_fault("hang-rank:0@60") == Fault("hang-rank", "0", 60.0)
    assert parse_fault("preempt@90") == Fault("preempt", None, 90.0)
    assert str(parse_fault("kill-host:algo-2@30")) == "kill-host:algo-2@30"


@pytest.mark.parametrize("text", ["kill-host@3", "kill-host:node1@3", "kill-rank:x@1", "preempt:algo-1@3",
                                  "explode@3", "kill-host:algo-1", "kill-host:algo-1@-1"])
def test_bad_faults_say_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match="kill-host|preempt|rank"):
        parse_fault(text)


def test_targets_must_exist_in_the_job() -> None:
    faults = [parse_fault("kill-host:algo-3@1"), parse_fault("kill-rank:4@1"), parse_fault("kill-host:algo-1@1")]
    assert check_targets(faults, ["algo-1", "algo-2"], world_size=4) == [
        "kill-host:algo-3@1: the job's hosts are algo-1, algo-2", "kill-rank:4@1: the job's ranks are 0-3"]


def test_fault_options_check_targets_against_the_job() -> None:
    import pytest

    from smdist_launcher.backends.toolkit.fault_options import FaultOptions
    from smdist_launcher.errors import ValidationError

    opts = FaultOptions(inject=["kill-rank:1@5", "kill-host:algo-1@2"])
    assert [str(f) for f in opts.faults_for(["algo-1"], 2, "slurm")] == ["kill-host:algo-1@2", "kill-rank:1@5"]
    with pytest.raises(ValidationError) as info:
        FaultOptions(inject=["kill-rank:9@1"]).faults_for(["algo-1"], 2, "slurm")
    assert info.value.errors[0].path == "slurm.inject" and "ranks are 0-1" in info.value.errors[0].message
