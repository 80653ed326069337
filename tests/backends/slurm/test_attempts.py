"""Slurm's attempt loop, without a cluster: who failed first, where an attempt began (read back from the logs), and
the fault options checked before anything is submitted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smdist_launcher.backends.slurm.attempts import EXITS_DIR, _first_steps, first_exit
from smdist_launcher.backends.slurm.options import SlurmOptions
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
from smdist_launcher.container.hang_detector import Monitor


def test_the_first_node_to_fail_is_the_cause(tmp_path: Path) -> None:
    job = JobDir(tmp_path)
    exits = tmp_path / EXITS_DIR
    exits.mkdir(parents=True)
    for host, code, at in (("algo-1", 1, 20.0), ("algo-2", 137, 10.0), ("algo-3", 0, 5.0)):
        (exits / f"{host}.json").write_text(json.dumps({"host": host, "code": code, "time": at}))
    first = first_exit(job)
    assert first is not None and (first.host, first.code) == ("algo-2", 137)


def test_where_an_attempt_began_is_read_back_from_the_logs(tmp_path: Path) -> None:
    log = tmp_path / "algo-1.log"
    log.write_text("[algo-1 r0] step 0\n[algo-1 r0] step 7\n[algo-1] [smdist] ---- attempt 2 ----\n")
    offset = log.stat().st_size
    with open(log, "a") as f:
        f.write("[algo-1] running: torchrun ...\n[algo-1 r1] step 8 loss 0.1\n[algo-1 r0] step 8 loss 0.2\n")
    resilience = ResiliencePlan(monitors=[Monitor("step", r"step (\d+)", 60.0)])
    assert _first_steps(resilience, {"algo-1": log}, {"algo-1": offset}) == {"step": 8}
    assert _first_steps(resilience, {"algo-1": log}, {"algo-1": 0}) == {"step": 0}


def test_resilience_settings_travel_through_the_job_folder() -> None:
    plan = ResiliencePlan(max_attempts=3, retry_on="any", monitors=[Monitor("step", r"step (\d+)", 60.0, 5.0)],
                          process_restarts=1)
    assert ResiliencePlan.from_json(plan.to_json()) == plan


def test_bad_faults_are_refused_with_the_key_path() -> None:
    from smdist_launcher.errors import ValidationError

    with pytest.raises(ValueError, match="kill-host needs a host name"):
        SlurmOptions(inject=["kill-host@3"])
    from smdist_launcher.backends.slurm.options import slurm_options

    with pytest.raises(ValidationError) as info:
        slurm_options({"inject": ["explode@3"]})
    assert info.value.errors[0].path.startswith("slurm.inject")


def test_a_node_whose_logs_failed_fails_the_attempt_with_that_reason(tmp_path: Path) -> None:
    from smdist_launcher.backends.slurm.attempts import log_failure
    from smdist_launcher.backends.slurm.node import record_exit

    job = JobDir(tmp_path)
    record_exit(job, "algo-1", 0)
    assert log_failure(job) is None
    record_exit(job, "algo-2", 1, "writing logs/algo-2.log failed: OSError: [Errno 28] No space left on device")
    assert log_failure(job) == ("the job's logs failed on algo-2: writing logs/algo-2.log failed: OSError: "
                                "[Errno 28] No space left on device")
