"""folder_jobs: a job's logs are read without following a link planted in place of a log file (issue 28)."""
from __future__ import annotations

import os
from pathlib import Path

from smdist_launcher.backends.toolkit.folder_jobs import follow_log_files
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.records import COMPLETED, JobRecord

SECRET = "root:$6$secret-hash:19000:0:99999:7:::\n"


def _job(tmp_path: Path) -> tuple[JobRecord, Path]:
    job = JobDir.create(tmp_path / "jobs", "linked-logs")
    record = JobRecord(job_name="linked-logs", job_id="j-1", job_dir=str(job.root), status=COMPLETED,
                       plan={"hosts": [{"name": "algo-1"}, {"name": "algo-2"}, {"name": "algo-3"}]})
    sentinel = tmp_path / "shadow"
    sentinel.write_text(SECRET)
    job.log_file("algo-1").write_text("[algo-1] hello\n")
    job.log_file("algo-2").symlink_to(sentinel)  # a log name pointing at root's file
    os.mkfifo(job.log_file("algo-3"))  # a FIFO: would block a plain read forever
    return record, sentinel


def test_logs_never_show_a_file_a_planted_link_points_at(tmp_path: Path) -> None:
    record, _ = _job(tmp_path)
    for follow in (False, True):
        seen: list[str] = []
        follow_log_files(record, None, follow, seen.append, refresh=lambda: record)
        assert "".join(seen) == "[algo-1] hello\n"


# With a 192 MiB address-space limit, a log of 384 MiB (sparse; a job may print gigabytes) is shown whole, read a piece
# at a time; reading it at once would fail with MemoryError.
SHOW_HUGE_LOG = r'''
import resource, sys
from smdist_launcher.backends.toolkit.folder_jobs import follow_log_files
from smdist_launcher.backends.toolkit.records import JobRecord
resource.setrlimit(resource.RLIMIT_AS, (192 << 20, 192 << 20))
record = JobRecord(job_name="huge-log", job_id="j-2", job_dir=sys.argv[1], status="Completed",
                   plan={"hosts": [{"name": "algo-1"}]})
for follow in (False, True):
    seen = [0, ""]
    def emit(text):
        seen[0] += len(text)
        seen[1] = (seen[1] + text[-20:])[-20:]
    follow_log_files(record, None, follow, emit, refresh=lambda: record)
    print(seen[0], seen[1].split("\n")[-2])
'''


def test_a_huge_log_is_shown_whole_without_being_read_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    job = JobDir.create(tmp_path / "jobs", "huge-log")
    size = 384 << 20
    with open(job.log_file("algo-1"), "wb") as f:
        f.truncate(size)
        f.seek(0, os.SEEK_END)
        f.write(b"\n[algo-1] the end\n")
    out = subprocess.run([sys.executable, "-c", SHOW_HUGE_LOG, str(job.root)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [f"{size + 18} [algo-1] the end"] * 2
