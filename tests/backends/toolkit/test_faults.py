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
