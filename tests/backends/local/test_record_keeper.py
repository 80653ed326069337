"""A local job's record keeper: job.json saved under one lock from every thread, phases shown, the end in one line."""
from __future__ import annotations

import io
import json
import threading
from pathlib import Path

from smdist_launcher.backends.local.record_keeper import RecordKeeper
from smdist_launcher.backends.phases import Phase
from smdist_launcher.backends.states import JobState
from smdist_launcher.backends.toolkit.job_console import PlainConsole
from smdist_launcher.backends.toolkit.records import JobRecord


def _keeper(tmp_path: Path) -> tuple[RecordKeeper, io.StringIO]:
    out = io.StringIO()
    record = JobRecord(job_name="j", job_id="j-1", job_dir=str(tmp_path))
    return RecordKeeper(record, tmp_path / "job.json", PlainConsole(out), "j"), out


def test_every_change_is_saved_and_the_end_told_in_one_line(tmp_path: Path) -> None:
    keeper, out = _keeper(tmp_path)
    keeper.phase(Phase.RUNNING, "2/2 hosts up")
    assert json.loads((tmp_path / "job.json").read_text())["phase"] == "running"
    keeper.injected({"fault": "kill-host:algo-2@4"})
    keeper.stragglers({"step": [3]})
    keeper.attempts([{"attempt": 1, "cause": "completed"}])
    keeper.end(JobState.COMPLETED, None, "file:///model.tar.gz")
    saved = json.loads((tmp_path / "job.json").read_text())
    assert (saved["status"], saved["phase"], saved["attempts"][0]["cause"]) == ("Completed", "done", "completed")
    assert saved["backend_info"] == {"injected": [{"fault": "kill-host:algo-2@4"}], "stragglers": {"step": [3]}}
    lines = out.getvalue().splitlines()
    assert "[smdist] stragglers (step): rank(s) 3 far behind" in lines
    assert lines[-1].startswith("[smdist] job j completed in ") and lines[-1].endswith("; model: file:///model.tar.gz")


def test_saves_from_many_threads_leave_a_whole_record(tmp_path: Path) -> None:
    keeper, _ = _keeper(tmp_path)
    threads = [threading.Thread(target=keeper.stragglers, args=({"step": [i]},)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert JobRecord.load(tmp_path / "job.json").backend_info["stragglers"]["step"][0] in range(8)
