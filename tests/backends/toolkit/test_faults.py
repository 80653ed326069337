"""--inject FAULT@SECONDS: parsed and checked against the job before anything starts."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.faults import (
    Fault,
    check_targets,
    parse_fault,
    rank_pid,
    rank_processes,
    signal_rank,
)
from smdist_launcher.container.stack_dumps import rank_pids


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


def test_a_rank_fault_signals_only_the_process_carrying_this_attempts_marker(tmp_path: Path) -> None:
    """Attempt 1's stack-dump file names a pid that an unrelated process holds now: a pid file would signal it (as
    rank_pids shows); the marker (job id, attempt, rank in the environment) finds the real rank of attempt 2 and
    not the worker it started."""
    marker = {"SMDIST_JOB_ID": "faults-marker-job", "RANK": "1"}
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "OMPI_COMM_WORLD_RANK", "SMDIST_RANK")}
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    unrelated = subprocess.Popen(sleep, env=base)
    rank = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                             "print('up', flush=True); time.sleep(600)"],
                            env={**base, **marker, "SMDIST_ATTEMPT": "2"}, stdout=subprocess.PIPE)
    try:
        assert rank.stdout is not None and rank.stdout.readline() == b"up\n"  # its worker runs too
        stacks = tmp_path / "stacks"
        stacks.mkdir()
        (stacks / f"{unrelated.pid}.txt").write_text(json.dumps({"pid": unrelated.pid, "rank": 1}) + "\n")
        assert rank_pids([stacks]) == {1: unrelated.pid}  # what the pid files say

        assert rank_pid("faults-marker-job", 1, 1) is None  # attempt 1 is over
        assert signal_rank("faults-marker-job", 1, 1, signal.SIGKILL) is None
        assert [p.pid for p in rank_processes("faults-marker-job", 2, 1)][0] == rank.pid
        assert len(rank_processes("faults-marker-job", 2, 1)) == 2  # the rank and its worker
        assert rank_pid("faults-marker-job", 2, 0) is None and rank_pid("another-job", 2, 1) is None
        assert signal_rank("faults-marker-job", 2, 1, signal.SIGKILL) == rank.pid
        assert rank.wait() == -signal.SIGKILL and unrelated.poll() is None
    finally:
        for proc in rank_processes("faults-marker-job", 2, 1):
            proc.kill()
        for proc in (unrelated, rank):
            proc.kill()
            proc.wait()
