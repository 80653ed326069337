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


def test_concurrent_updates_of_one_record_lose_nothing(tmp_path):
    """Slurm's attempt loop and a launcher refreshing the job's state both change job.json: under update_record each
    read-modify-write is whole (before, the refresh could save over a just-recorded attempt)."""
    import threading

    from smdist_launcher.backends.toolkit.records import update_record

    path = tmp_path / "job.json"
    JobRecord(job_name="j", job_id="j-1", job_dir=str(tmp_path)).save(path)
    refreshed = threading.Event()

    def refresh() -> None:
        update_record(path, lambda r: r.backend_info.update(slurm_state="RUNNING"))
        refreshed.set()

    def record_attempt(record: JobRecord) -> None:
        other = threading.Thread(target=refresh)
        other.start()  # loads the record while this change is half done: it must wait for it
        refreshed.wait(1.0)  # bounded: with the lock it never comes before this save
        record.attempts.append({"attempt": 1})
        threads.append(other)

    threads: list[threading.Thread] = []
    update_record(path, record_attempt)
    threads[0].join()
    final = JobRecord.load(path)
    assert final.attempts == [{"attempt": 1}] and final.backend_info == {"slurm_state": "RUNNING"}


def test_status_and_phase_are_enums_saved_as_their_plain_values(tmp_path):
    import json

    from smdist_launcher.backends.phases import Phase
    from smdist_launcher.backends.states import JobState

    record = JobRecord(job_name="j", job_id="j-1", job_dir=str(tmp_path))
    assert record.status is JobState.IN_PROGRESS and record.phase is Phase.CREATED
    record.enter_phase(Phase.RUNNING, now=1.0)
    record.finish(JobState.COMPLETED, now=2.0)
    record.save(tmp_path / "job.json")
    saved = json.loads((tmp_path / "job.json").read_text())
    assert (saved["status"], saved["phase"]) == ("Completed", "done")
    again = JobRecord.load(tmp_path / "job.json")
    assert again.status is JobState.COMPLETED and again.phase is Phase.DONE


def test_a_record_that_kept_sagemakers_secondary_status_as_its_phase_reads_back(tmp_path):
    """sagemaker records once kept SageMaker's SecondaryStatus in `phase`: read back, it is a Phase, and SageMaker's
    word is kept in secondary_status."""
    import json

    from smdist_launcher.backends.phases import Phase

    (tmp_path / "job.json").write_text(json.dumps({"job_name": "j", "job_id": "j", "job_dir": str(tmp_path),
                                                   "status": "InProgress", "phase": "Training",
                                                   "backend": "sagemaker", "launcher_pid": 0}))
    record = JobRecord.load(tmp_path / "job.json")
    assert (record.phase, record.secondary_status) == (Phase.RUNNING, "Training")
    record.finish("Completed", now=5.0)  # Phase.of() raised here on the old shape
    assert record.phase is Phase.DONE


def test_the_final_record_is_saved_on_a_disk_the_job_filled(tmp_path):
    """The training script filled the disk: job.json's end (Failed and why) still lands, rewritten in the blocks the
    record already holds, and no temporary file is left (before: the record stayed InProgress, a .tmp beside it)."""
    from .small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.backends.toolkit.records import JobRecord
record = JobRecord(job_name="j", job_id="j-1", job_dir=str(disk))
record.enter_phase("running")
# 40 attempts: just under one 4 KiB block as saved (indented); 45 would not fit it indented
record.attempts = [{"attempt": i, "cause": "host_lost", "decision": "retry"} for i in range(40)]
record.save(disk / "job.json")
fill()
record.attempts += [{"attempt": i, "cause": "host_lost", "decision": "retry"} for i in range(40, 45)]
record.finish("Failed", "rank 0: OSError: [Errno 28] No space left on device")
record.save(disk / "job.json")
again = JobRecord.load(disk / "job.json")
print(json.dumps({"status": again.status, "reason": again.failure_reason, "attempts": len(again.attempts),
                  "files": sorted(p.name for p in disk.iterdir())}))
''')
    assert found == {"status": "Failed", "reason": "rank 0: OSError: [Errno 28] No space left on device",
                     "attempts": 45, "files": ["filler", "job.json"]}
