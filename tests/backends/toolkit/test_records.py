from __future__ import annotations

import os

import pytest

from smdist_launcher.backends.toolkit.jobdir import JobDir, check_job_name, jobs_root
from smdist_launcher.backends.toolkit.records import JobRecord, list_records


def test_record_phases_and_round_trip(tmp_path):
    record = JobRecord(job_name="j", job_id="j-1", job_dir=str(tmp_path))
    record.enter_phase("staging", now=10.0)
    record.enter_phase("running", now=12.0)
    record.finish("Failed", "host algo-2, rank 3 failed first", now=15.0)
    assert record.phases == {"staging": [10.0, 12.0], "running": [12.0, 15.0], "done": [15.0, 15.0]}
    record.save(tmp_path / "job.json")
    again = JobRecord.load(tmp_path / "job.json")
    assert again == record and again.status == "Failed"


def test_job_dirs_are_never_reused_and_names_are_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    root = jobs_root()
    assert root == tmp_path / "jobs"
    job = JobDir.create(root, "a-1")
    assert job.host_root("algo-2") == root / "a-1" / "hosts" / "algo-2" / "opt" / "ml"
    with pytest.raises(FileExistsError, match="job_name: a job named 'a-1' already exists"):
        JobDir.create(root, "a-1")
    for bad in ("../x", "a/b", "", "-a", "a" * 64):
        with pytest.raises(ValueError, match="job_name"):
            check_job_name(bad)
    JobRecord(job_name="a-1", job_id="1", job_dir=str(job.root), created=2.0).save(job.record_file)
    other = JobDir.create(root, "b-1")
    JobRecord(job_name="b-1", job_id="2", job_dir=str(other.root), created=1.0).save(other.record_file)
    (root / "junk").mkdir()
    (root / "junk" / "job.json").write_text("{not json")
    assert [r.job_name for r in list_records(root)] == ["b-1", "a-1"]


def test_launcher_gone_when_its_pid_is_dead_or_reused(tmp_path):
    import subprocess
    import sys

    from smdist_launcher.backends.toolkit.records import JobRecord, process_start

    mine = JobRecord(job_name="j", job_id="j-1", job_dir=str(tmp_path))
    assert mine.launcher_started == process_start(os.getpid()) and not mine.launcher_gone()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert JobRecord(job_name="j", job_id="j-2", job_dir=str(tmp_path), launcher_pid=dead.pid).launcher_gone()
    # the pid is alive, but it is another process than the one that started the job (pid reuse)
    reused = JobRecord(job_name="j", job_id="j-3", job_dir=str(tmp_path), launcher_started=mine.launcher_started - 1)
    assert reused.launcher_gone()
    assert not JobRecord(job_name="j", job_id="j-4", job_dir=str(tmp_path), status="Completed",
                         launcher_pid=dead.pid).launcher_gone()
