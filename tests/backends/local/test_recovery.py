"""A job whose launcher died is finished by the next command (recovery.py) from the kept layout: the trees of the
last attempt that ran, wherever they are (hosts/, or attempts/<n>/ once kept for a next attempt)."""
from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from smdist_launcher.backends.local.recovery import finalize_if_interrupted
from smdist_launcher.backends.toolkit import records

# A job (attempt 1 exits 3, retry_on any) whose launcher is SIGKILLed once attempt 1's trees were kept (between), or
# while attempt 2 is staged (stage): the launcher's own end never runs.
LAUNCHER = r'''
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from backends.local.test_job import STOP_BETWEEN
from smdist_launcher import PyTorch
from smdist_launcher.backends.local.job import LocalJob
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.resilience_plan import ResiliencePlan
from smdist_launcher.backends.toolkit.staging import prepare_local_run

tmp, where = Path(sys.argv[1]), sys.argv[2]
(tmp / "src").mkdir(parents=True)
(tmp / "src" / "train.py").write_text(STOP_BETWEEN)
est = PyTorch(entry_point="train.py", source_dir=str(tmp / "src"), instance_type="local", instance_count=1,
              framework_version="2.3", py_version="py311")
plan, code = prepare_local_run(est.submission(est.plan(job_name="died")))
job = LocalJob(plan, JobDir.create(tmp / "jobs", plan.job_name), logs=False, code=code,
               resilience=ResiliencePlan(max_attempts=3, retry_on="any"))
keep, stager = job.between_attempts, job._stager

def between(number, decision):
    keep(number, decision)
    if where == "between":
        os.kill(os.getpid(), signal.SIGKILL)

class Stager:
    def __getattr__(self, name):
        return getattr(stager, name)

    def stage(self, plan, number, record):
        out = stager.stage(plan, number, record)
        if number == 2:  # attempt 2's record saved (its temp folder named), its hosts not started
            job._keeper.save()
            os.kill(os.getpid(), signal.SIGKILL)
        return out

job.between_attempts = between
job._stager = Stager()
job.wait()
'''


@pytest.mark.parametrize("where", ["between", "stage"])
def test_a_launcher_that_died_between_attempts_is_finished_with_the_last_attempts_outputs(
        tmp_path: Path, where: str) -> None:
    """Before: recovery packed hosts/ only, gone (between) or attempt 2's fresh staging (stage): model.tar.gz
    without attempt 1's weights, and attempt 1's exit 3 missing from the reason."""
    tests = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", LAUNCHER, str(tmp_path), where, str(tests)], timeout=120)
    assert done.returncode == -9
    job_dir = tmp_path / "jobs" / "died"
    record = finalize_if_interrupted(records.JobRecord.load(job_dir / "job.json"), grace=1.0)
    saved = json.loads((job_dir / "job.json").read_text())
    assert record.status == saved["status"] == records.INTERRUPTED
    assert "before that, host algo-1, rank 0 failed first with exit code 3" in saved["failure_reason"]
    with tarfile.open(saved["model_data"].removeprefix("file://")) as tar:
        assert tar.getnames() == ["weights-attempt1.txt"]
    assert (job_dir / "attempts" / "1" / "algo-1" / "opt" / "ml" / "model" / "weights-attempt1.txt").is_file()
    tmpdir = Path(saved["local"]["tmpdir"])
    assert tmpdir.name.startswith("smdist-") and not tmpdir.exists()
