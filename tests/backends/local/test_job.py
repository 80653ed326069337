"""LocalJob's own decisions (its collaborators have their own tests): why an attempt ended."""
from __future__ import annotations

from smdist_launcher.backends.local.job import attempt_cause
from smdist_launcher.backends.toolkit import records
from smdist_launcher.backends.toolkit.restart_policy import Cause
from smdist_launcher.backends.toolkit.supervisor import Outcome


def test_completion_wins_over_a_late_hang_or_preempt() -> None:
    """Every host exited 0, and a hang or a preempt was noticed just after: the attempt completed."""
    done = Outcome(records.COMPLETED, exit_codes={"algo-1": 0, "algo-2": 0})
    assert attempt_cause(done, {}, hung=True, preempted=True) is Cause.COMPLETED


def test_a_stopped_attempt_is_named_by_what_stopped_it() -> None:
    stopped = Outcome(records.STOPPED, reason="hang detected")
    assert attempt_cause(stopped, {}, hung=True, preempted=False) is Cause.HANG
    assert attempt_cause(stopped, {}, hung=False, preempted=True) is Cause.PREEMPTED
    assert attempt_cause(stopped, {}, hung=False, preempted=False) is Cause.STOPPED
    assert attempt_cause(Outcome(records.MAX_RUNTIME_EXCEEDED), {}, hung=False, preempted=False) is Cause.MAX_RUNTIME


def test_a_log_consumer_failure_fails_the_job_with_its_reason(tmp_path) -> None:
    """ENOSPC under the job's logs (its log file is /dev/full): the reader drains on, and the job fails naming the
    failure instead of running on with its logs lost (no retry: the next attempt would lose them too)."""
    import pytest

    from smdist_launcher import PyTorch
    from smdist_launcher.backends.local.job import LocalJob
    from smdist_launcher.backends.toolkit.jobdir import JobDir
    from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
    from smdist_launcher.backends.toolkit.staging import prepare_local_run
    from smdist_launcher.errors import JobFailedError

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("for i in range(3):\n    print('step', i, flush=True)\n")
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    plan, code = prepare_local_run(est.submission(est.plan(job_name="full-disk")))
    job_dir = JobDir.create(tmp_path / "jobs", plan.job_name)
    job_dir.log_file("algo-1").parent.mkdir(parents=True, exist_ok=True)
    job_dir.log_file("algo-1").symlink_to("/dev/full")
    job = LocalJob(plan, job_dir, logs=False, code=code, resilience=ResiliencePlan(max_attempts=2, retry_on="any"))
    with pytest.raises(JobFailedError):
        job.wait()
    assert job.record.status == records.FAILED
    assert "writing logs/algo-1.log failed: OSError: [Errno 28]" in (job.failure_reason or "")
    assert [a["cause"] for a in job.record.attempts] == [Cause.LAUNCHER_ERROR.value]


def test_the_run_policys_max_run_stops_the_job(tmp_path) -> None:
    """run_job reads max_run from the submission's run policy (not from the arguments through getattr)."""
    import pytest

    from smdist_launcher import PyTorch
    from smdist_launcher.backends.api import RunPolicy, Submission
    from smdist_launcher.backends.local.job import run_job
    from smdist_launcher.errors import JobFailedError

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    submission = est.submission(est.plan(job_name="short-run"))
    short = Submission(plan=submission.plan, code=submission.code, policy=RunPolicy(max_run=1))
    with pytest.raises(JobFailedError) as info:
        run_job(short, jobs_root=tmp_path / "jobs", logs=False, grace=1.0)
    assert info.value.status == records.MAX_RUNTIME_EXCEEDED


STOP_BETWEEN = (
    "import os, sys\n"
    "attempt = os.environ['SMDIST_ATTEMPT']\n"
    "open(os.path.join(os.environ['SM_MODEL_DIR'], f'weights-attempt{attempt}.txt'), 'w').write(attempt)\n"
    "print('step 0 attempt', attempt, flush=True)\n"
    "sys.exit(3 if attempt == '1' else 0)\n")


def _stopped_between_attempts(tmp_path, how: str):
    """Attempt 1 exits 3 (retry_on any); the job is stopped (stop() / SIGTERM to the launcher) while attempt 2 is
    prepared. The trigger is a step wrapped here; what is checked is how the job ends."""
    import os
    import signal

    from smdist_launcher import PyTorch
    from smdist_launcher.backends.local.job import LocalJob
    from smdist_launcher.backends.toolkit.jobdir import JobDir
    from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
    from smdist_launcher.backends.toolkit.staging import prepare_local_run

    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "train.py").write_text(STOP_BETWEEN)
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    plan, code = prepare_local_run(est.submission(est.plan(job_name=f"stop-{how}")))
    job = LocalJob(plan, JobDir.create(tmp_path / "jobs", plan.job_name), logs=False, code=code, grace=1.0,
                   resilience=ResiliencePlan(max_attempts=3, retry_on="any"))
    if how == "stop":
        keep = job.between_attempts

        def between(number, decision):  # stop() lands while attempt 1's trees are kept
            keep(number, decision)
            job.stop()
        job.between_attempts = between  # type: ignore[method-assign]
    else:
        stager = job._stager

        class Stager:  # SIGTERM lands once attempt 2's trees are staged, before its hosts start
            def __getattr__(self, name):
                return getattr(stager, name)

            def stage(self, plan, number, record):
                out = stager.stage(plan, number, record)
                if number == 2:
                    os.kill(os.getpid(), signal.SIGTERM)
                return out
        job._stager = Stager()
    return job


def test_a_stop_between_attempts_ends_stopped_with_the_last_attempts_outputs(tmp_path) -> None:
    """Before: SIGTERM while attempt 2 was staged ended the job Stopped with nothing packed (no model.tar.gz) and
    attempt 1's exit 3 gone; stop() between attempts started attempt 2's hosts only to stop them and packed those."""
    import json
    import tarfile

    import psutil
    import pytest

    from smdist_launcher.errors import JobFailedError

    for how, words in (("stop", "stopped by stop()"), ("sigterm", "stopped by SIGTERM")):
        job = _stopped_between_attempts(tmp_path / how, how)
        with pytest.raises(JobFailedError):
            job.wait()
        record = json.loads((job.job_dir / "job.json").read_text())
        assert record["status"] == records.STOPPED, how
        assert record["failure_reason"].startswith(f"{words} before attempt 2 started; attempt 1: "), record
        assert "exit code 3" in record["failure_reason"]
        assert [a["cause"] for a in record["attempts"]] == [Cause.SCRIPT_ERROR.value]
        assert record["model_data"], how  # packed: attempt 1's files, from its kept trees
        with tarfile.open(record["model_data"].removeprefix("file://")) as tar:
            assert tar.getnames() == ["weights-attempt1.txt"]
        assert (job.job_dir / "attempts" / "1" / "algo-1" / "opt" / "ml" / "model").is_dir()
        assert "step 0 attempt 1" in (job.job_dir / "logs" / "algo-1.log").read_text()
        assert not [p for p in psutil.process_iter(["environ"])
                    if (p.info["environ"] or {}).get("SMDIST_JOB_ID") == job.job_id]


def test_a_script_that_fills_its_disk_fails_as_a_full_disk_and_is_not_retried(tmp_path) -> None:
    """A real local job whose script fills its host's disk (the hosts' folder on a 256 KiB tmpfs, the logs not):
    with max_retry_attempts 2 it ends after one attempt, cause disk_full, the reason naming the host and the full
    disk, and the host's failure.json is there, written over the room its runtime took at start (before: no
    failure.json, "(no failure.json: the runtime itself failed)", host_lost, retried)."""
    from backends.toolkit.small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher import PyTorch
from smdist_launcher.backends.local.job import LocalJob
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
from smdist_launcher.backends.toolkit.staging import prepare_local_run
from smdist_launcher.errors import JobFailedError
src = disk / "src"
src.mkdir()
(src / "train.py").write_text(
    "print('filling', flush=True)\\n"
    "with open('filler', 'wb') as f:\\n"
    "    while True:\\n"
    "        f.write(b'x' * 4096)\\n"
    "        f.flush()\\n")
est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
              framework_version="2.3", py_version="py311")
plan, code = prepare_local_run(est.submission(est.plan(job_name="fills-disk")))
job_dir = JobDir.create(Path(sys.argv[0]).parent / "jobs", plan.job_name)  # on the real disk: its logs are kept
small_disk_at(job_dir.root / "hosts")
job = LocalJob(plan, job_dir, logs=False, code=code, resilience=ResiliencePlan(max_attempts=2))
try:
    job.wait()
except JobFailedError:
    pass
failure = json.loads((job_dir.host_root("algo-1") / "output" / "failure.json").read_text())
print(json.dumps({"status": job.record.status, "reason": job.failure_reason,
                  "attempts": [(a["cause"], a["decision"]) for a in job.record.attempts],
                  "disk_full": failure.get("disk_full")}))
''')
    assert found["status"] == records.FAILED
    assert found["attempts"] == [[Cause.DISK_FULL.value, "finish"]]
    assert found["reason"] == ("host algo-1, rank 0 failed first with exit code 1: its disk is full "
                               "(OSError: [Errno 28] No space left on device)")
    assert found["disk_full"] == "failure.json could not be written: [Errno 28] No space left on device"


def test_a_restaging_that_fails_names_the_path_and_the_error(tmp_path) -> None:
    """Attempt 1 fails (exit 3, retry_on any) after the checkpoint store grew beyond what the hosts' disk holds (a
    256 KiB tmpfs): attempt 2's restore of the checkpoints fails mid-copy, and the job's reason names the file it was
    writing and the errno's words (before: "attempt 2 could not start: OSError: [Errno 28] No space left on device",
    no path: a write on a descriptor names none)."""
    from backends.toolkit.small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher import PyTorch
from smdist_launcher.backends.local.job import LocalJob
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
from smdist_launcher.backends.toolkit.staging import prepare_local_run
from smdist_launcher.errors import JobFailedError
real = Path(sys.argv[0]).parent  # the real disk: the job's folder, its logs and the checkpoint store
store = real / "store"
store.mkdir()
src = real / "src"
src.mkdir()
(src / "train.py").write_text(
    "import os, sys\\n"
    "if os.environ['SMDIST_ATTEMPT'] == '1':\\n"
    "    open(os.path.join(os.environ['STORE'], 'big.pt'), 'wb').write(b'x' * (400 << 10))\\n"
    "    sys.exit(3)\\n")
est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
              framework_version="2.3", py_version="py311", environment={"STORE": str(store)},
              checkpoint_s3_uri=store.as_uri())
plan, code = prepare_local_run(est.submission(est.plan(job_name="restage")))
job_dir = JobDir.create(real / "jobs", plan.job_name)
small_disk_at(job_dir.root / "hosts")
job = LocalJob(plan, job_dir, logs=False, code=code, resilience=ResiliencePlan(max_attempts=2, retry_on="any"))
try:
    job.wait()
except JobFailedError:
    pass
print(json.dumps({"status": job.record.status, "reason": job.failure_reason,
                  "target": str(job_dir.host_root("algo-1") / "checkpoints" / "big.pt")}))
''')
    assert found["status"] == records.FAILED
    assert found["reason"] == ("host algo-1, rank 0 failed first with exit code 3; attempt 2 could not start: OSError: "
                               f"[Errno 28] No space left on device: '{found['target']}'")


def test_a_runtime_killed_outright_is_still_a_lost_host_and_retried(tmp_path) -> None:
    """The other side of a full disk: a host's runtime killed outright (SIGKILL, as the OOM killer does) leaves no
    failure.json either, and is still host_lost and retried, even when its log once said ENOSPC."""
    from smdist_launcher import PyTorch
    from smdist_launcher.backends.local.job import LocalJob
    from smdist_launcher.backends.toolkit.jobdir import JobDir
    from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
    from smdist_launcher.backends.toolkit.staging import prepare_local_run

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(
        "import json, os, signal, time\n"
        "if os.environ['SMDIST_ATTEMPT'] == '1':\n"
        "    print('saving failed: [Errno 28] No space left on device; retrying', flush=True)\n"
        "    runtime = json.load(open(os.path.join('..', 'run', 'runtime.json')))['pid']\n"
        "    os.kill(runtime, signal.SIGKILL)\n"
        "    time.sleep(60)\n")
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    plan, code = prepare_local_run(est.submission(est.plan(job_name="runtime-killed")))
    job = LocalJob(plan, JobDir.create(tmp_path / "jobs", plan.job_name), logs=False, code=code,
                   resilience=ResiliencePlan(max_attempts=2))
    job.wait()
    assert [(a["cause"], a["decision"]) for a in job.record.attempts] == [
        (Cause.HOST_LOST.value, "retry"), (Cause.COMPLETED.value, "finish")]
    assert "SIGKILL" in job.record.attempts[0]["reason"]
