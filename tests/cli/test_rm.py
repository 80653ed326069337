"""`smdist rm` and `smdist prune`: remove ended jobs, never a running one."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from smdist_launcher.cli import main as cli

from .jobfolders import make_job


@pytest.fixture
def running_launcher():
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_rm_removes_named_jobs_and_refuses_a_running_one(tmp_path: Path, running_launcher: int,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "jobs"
    make_job(root, "done-1")
    make_job(root, "done-2", "Failed")
    make_job(root, "live-1", "InProgress", pid=running_launcher)
    assert cli.main(["rm", "done-1", "nope", "--jobs-dir", str(root)]) == 2   # a typo removes nothing
    assert (root / "done-1").is_dir()
    assert "no job named 'nope'" in capsys.readouterr().err
    assert cli.main(["rm", "done-1", "done-2", "live-1", "--jobs-dir", str(root)]) == 1
    io = capsys.readouterr()
    assert io.out.splitlines() == ["removed done-1", "removed done-2"]
    assert f"live-1: still running (launcher pid {running_launcher})" in io.err
    assert sorted(p.name for p in root.iterdir()) == ["live-1"]


def test_prune_filters_by_age_and_status_and_keeps_running_jobs(tmp_path: Path, running_launcher: int,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "jobs"
    week = 7 * 86400
    make_job(root, "old-failed", "Failed", age_s=week + 60)
    make_job(root, "old-ok", "Completed", age_s=week + 60)
    make_job(root, "new-failed", "Failed")
    make_job(root, "old-live", "InProgress", age_s=week + 60, pid=running_launcher)
    make_job(root, "old-gone", "InProgress", age_s=week + 60, pid=2**22 + 7)   # launcher long dead: Interrupted
    args = ["--jobs-dir", str(root)]
    assert cli.main(["prune", "--older-than", "7d", "--status", "failed", "interrupted", "--dry-run", *args]) == 0
    assert capsys.readouterr().out.splitlines() == ["would remove old-failed", "would remove old-gone"]
    assert len(list(root.iterdir())) == 5
    assert cli.main(["prune", "--older-than", "7d", "--status", "failed", "interrupted", *args]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["new-failed", "old-live", "old-ok"]
    assert cli.main(["prune", *args]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["old-live"]
    capsys.readouterr()
    assert cli.main(["prune", "--older-than", "7 days", *args]) == 2
    assert "not an age; use a number and a unit" in capsys.readouterr().err
