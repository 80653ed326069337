"""Jobs that survive failures, on the process backend: a host killed mid-run (fault rehearsal) is retried from the
last checkpoint and ends with the same weights as an uninterrupted run; a hang is detected, named and retried; a
script error is not retried by default; a restart that ignores the checkpoints is flagged."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from backends.resilience_job import (
    archive_members,
    assert_retried_cleanly,
    channel_shapes,
    model_weights,
    resilience_estimator,
    shapes_estimator,
)
from smdist_launcher import PyTorch
from smdist_launcher.errors import JobFailedError

pytestmark = pytest.mark.slow


def _estimator(tmp_path: Path, name: str, **extra) -> PyTorch:
    return resilience_estimator(tmp_path, name, **extra)


def _weights(job) -> list[float]:
    return model_weights(job.model_data)


@pytest.fixture(scope="module")
def clean_weights(tmp_path_factory: pytest.TempPathFactory) -> list[float]:
    """The uninterrupted run every recovered one must match."""
    tmp_path = tmp_path_factory.mktemp("clean")
    job = _estimator(tmp_path, "clean", environment={"STEP_S": "0"}).fit(logs=False, jobs_root=str(tmp_path / "jobs"))
    return _weights(job)


def test_a_killed_host_is_retried_from_the_last_checkpoint(tmp_path: Path, clean_weights: list[float]) -> None:
    jobs = str(tmp_path / "jobs")
    est = _estimator(tmp_path, "killed", max_retry_attempts=2)
    job = est.fit(logs=False, jobs_root=jobs, inject=["kill-host:algo-2@4"])
    record = json.loads((job.job_dir / "job.json").read_text())
    assert record["status"] == "Completed"
    first, second = record["attempts"]
    assert first["cause"] == "host_lost" and first["decision"] == "retry" and "algo-2" in first["reason"]
    assert second["cause"] == "completed" and second["restored_checkpoints"] > 0
    assert _weights(job) == clean_weights
    log = (job.job_dir / "logs" / "algo-1.log").read_text()
    assert "---- attempt 2 ----" in log and "step 15" in log
    assert (job.job_dir / "attempts" / "1").is_dir()  # the first attempt's outputs and failure records are kept


def test_attempts_run_out_and_every_reason_is_kept(tmp_path: Path) -> None:
    est = _estimator(tmp_path, "exhausted", max_retry_attempts=2)
    with pytest.raises(JobFailedError):  # the second fault falls while the first attempt ends: it hits the second
        est.fit(logs=False, jobs_root=str(tmp_path / "jobs"), inject=["kill-host:algo-2@3", "kill-host:algo-1@3.5"])
    job_dir = next((tmp_path / "jobs").iterdir())
    record = json.loads((job_dir / "job.json").read_text())
    assert record["status"] == "Failed" and len(record["attempts"]) == 2
    assert [a["decision"] for a in record["attempts"]] == ["retry", "finish"]
    assert "max_retry_attempts reached" in record["attempts"][1]["why"]


def test_a_script_error_is_not_retried_unless_retry_on_any(tmp_path: Path) -> None:
    src = tmp_path / "raises"
    src.mkdir()
    (src / "train.py").write_text("raise RuntimeError('a bug in the script')\n")  # no torch needed: start fast
    for policy, attempts in ((None, 1), ({"retry_on": "any"}, 2)):
        est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                      framework_version="2.3", py_version="py311", max_retry_attempts=2, resilience=policy)
        with pytest.raises(JobFailedError):
            est.fit(logs=False, jobs_root=str(tmp_path / f"jobs-{attempts}"))
        record = json.loads(next((tmp_path / f"jobs-{attempts}").glob("*/job.json")).read_text())
        assert [a["cause"] for a in record["attempts"]] == ["script_error"] * attempts
        assert record["failure_reason"] == "host algo-1, rank 0 failed first with exit code 1"
    # `smdist report` of the retried one: both attempts and the script's traceback, in a page a real browser shows
    from cli.report_browser import load_in_browser
    from smdist_launcher.backends.toolkit.report_page import write_report

    page = write_report(next((tmp_path / "jobs-2").iterdir()))
    text = page.read_text()
    assert "RuntimeError: a bug in the script" in text and text.count("<td>script_error</td>") == 2
    assert load_in_browser(page, tmp_path).errors == []


def test_a_hang_is_detected_named_and_retried_and_a_restart_from_zero_is_flagged(tmp_path: Path) -> None:
    # start_after_s: the grace until the first step (torch, rendezvous, DDP), measured from the hosts' start
    monitor = {"log_monitoring": [{"name": "step", "pattern": r"step (\d+)", "expected_every_s": 4,
                                   "start_after_s": 60}]}
    est = _estimator(tmp_path, "hang", max_retry_attempts=2, resilience=monitor,
                     environment={"HANG_RANK": "1", "RESUME": "0", "STEPS": "8", "STEP_S": "0.1"})
    started = time.monotonic()
    job = est.fit(logs=False, jobs_root=str(tmp_path / "jobs"))
    record = json.loads((job.job_dir / "job.json").read_text())
    first, second = record["attempts"]
    assert first["cause"] == "hang" and "log monitor 'step'" in first["reason"]
    assert "rank 1 " in first["reason"] and "train.py" in first["reason"]  # named with where its stack was
    assert second["cause"] == "completed" and "began at step 0" in second.get("warning", "")
    assert time.monotonic() - started < 120


def test_a_killed_rank_restarts_in_place_before_any_job_restart(tmp_path: Path) -> None:
    """process_restarts: the host's runtime starts its torchrun again in place; the attempt goes on and resumes from
    the host's own checkpoint, with no whole-job restart."""
    est = _estimator(tmp_path, "inplace", max_retry_attempts=2, resilience={"process_restarts": 1}, instance_count=1)
    job = est.fit(logs=False, jobs_root=str(tmp_path / "jobs"), inject=["kill-rank:1@4"])
    record = json.loads((job.job_dir / "job.json").read_text())
    assert record["status"] == "Completed"
    assert [a["cause"] for a in record["attempts"]] == ["completed"]  # no whole-job restart was needed
    log = (job.job_dir / "logs" / "algo-1.log").read_text()
    assert "restarting them in place (process restart 1 of 1)" in log and "step 15" in log
    after = log.split("restarting them in place", 1)[1]
    restarted_at = int(after.split("] step ", 1)[1].split()[0])  # the first step of the restarted ranks
    assert 0 < restarted_at and restarted_at % 4 == 0  # from the last checkpoint, not from step 0



def test_a_retry_stages_every_channel_shape_afresh_and_keeps_only_the_last_attempts_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A single-file, a folder and a sharded channel; attempt 1 fails (algo-2 exits 3), attempt 2 starts from fresh
    trees, restored from the checkpoints: the archives hold attempt 2's files only, attempt 1's stay under attempts/1
    and the report lists its failure. (Before the one kept layout: `[Errno 17] File exists` staging attempt 2.)"""
    est = shapes_estimator(tmp_path, fail="exit3", resilience={"retry_on": "any"})
    job = est.fit(channel_shapes(tmp_path), logs=False, jobs_root=str(tmp_path / "jobs"))
    assert_retried_cleanly(job.job_dir, "script_error", {"algo-1": ["0"], "algo-2": ["0"]})
    data = job.job_dir / "hosts" / "algo-2" / "opt" / "ml" / "output" / "data"
    seen = json.loads((data / "data-attempt2-algo-2-0.json").read_text())["seen"]
    assert seen == {"single": ["train.csv"], "folder": ["a.csv"], "sharded": ["part-1.csv", "part-3.csv"]}
    kept = job.job_dir / "attempts" / "1" / "algo-2" / "opt" / "ml" / "output"
    assert (kept / "failure").exists()
    from smdist_launcher.backends.toolkit.job_report import read_report

    assert list(read_report(job.job_dir).earlier_failures) == [1]
    from smdist_launcher.backends.api import Job

    assert isinstance(job, Job)  # what every backend's submit() returns

    # `smdist status` lists attempt 1's failure and where its files are kept
    from smdist_launcher.cli.main import main

    assert main(["status", job.job_name, "--jobs-dir", str(tmp_path / "jobs")]) == 0
    out = capsys.readouterr().out
    assert "attempt 1: script_error: host algo-2" in out and "(its files: attempts/1/)" in out


@pytest.mark.mpi
def test_a_killed_mpi_host_is_retried_on_fresh_trees(tmp_path: Path) -> None:
    """2 hosts x 2 ranks under mpirun; kill-host:algo-2 in attempt 1: attempt 2's workers must not find the
    master's old failure.json or master_done.json (fresh trees), and it ends Completed."""
    est = shapes_estimator(tmp_path, fail="wait", distribution={"mpi": {"enabled": True, "processes_per_host": 2}})
    job = est.fit(logs=False, jobs_root=str(tmp_path / "jobs"), inject=["kill-host:algo-2@1"])
    record = assert_retried_cleanly(job.job_dir, "host_lost", {"algo-1": ["0", "1"], "algo-2": ["2", "3"]})
    assert "algo-2" in record["attempts"][0]["reason"]


def test_a_retry_that_cannot_start_still_finishes_the_job_with_the_real_cause(tmp_path: Path) -> None:
    """Attempt 1 fails (exit 3) and its input goes away: attempt 2 cannot be staged. The job still ends through its
    finish: attempt 1's outputs packed from its kept trees, the reason its exit 3 and then why attempt 2 did not start
    (before: "the job could not start: ..." only, no output/, the exit 3 lost)."""
    inputs = channel_shapes(tmp_path)
    single = Path(inputs["single"])
    est = shapes_estimator(tmp_path, fail="exit3", resilience={"retry_on": "any"},
                           environment={"REMOVE_ON_FAILURE": str(single)})
    (tmp_path / "src" / "train.py").write_text(
        "import os, sys\n"
        "if os.environ['SMDIST_ATTEMPT'] == '1' and os.environ['SM_CURRENT_HOST'] == 'algo-2':\n"
        "    os.remove(os.environ['REMOVE_ON_FAILURE'])\n" + (tmp_path / "src" / "train.py").read_text())
    with pytest.raises(JobFailedError):
        est.fit(inputs, logs=False, jobs_root=str(tmp_path / "jobs"))
    job_dir = next((tmp_path / "jobs").iterdir())
    record = json.loads((job_dir / "job.json").read_text())
    assert record["status"] == "Failed" and [a["cause"] for a in record["attempts"]] == ["script_error"]
    reason = record["failure_reason"]
    assert reason.startswith("host algo-2, rank 1 failed first with exit code 3; ")
    assert reason.endswith("attempt 2 could not start: FileNotFoundError: inputs.single: "
                           f"{single.as_uri()} does not exist; create it or fix the path")
    assert "weights-attempt1-algo-2-0.txt" in archive_members(record["model_data"])  # attempt 1, packed
