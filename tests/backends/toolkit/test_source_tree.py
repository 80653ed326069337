"""Local mode applies the archive's symlink rule before anything starts (no job folder, no process)."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.local import run_job
from smdist_launcher.backends.toolkit.source_tree import SymlinkError, check_source_links, walk_source


def _estimator(src: Path, **extra) -> PyTorch:
    return PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                   framework_version="2.3", py_version="py311", **extra)


def test_local_run_refuses_a_link_leaving_source_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n")
    (tmp_path / "secret").mkdir()
    (src / "data").symlink_to(tmp_path / "secret")
    est = _estimator(src)
    jobs = tmp_path / "jobs"
    with pytest.raises(SymlinkError, match=f"{src / 'data'} is a symbolic link to {tmp_path / 'secret'}"):
        run_job(est.submission(est.plan()), jobs_root=jobs)
    assert not jobs.exists()
    check_source_links(src, follow_symlinks=True)  # the opt-in


def test_loop_through_followed_links_is_reported(tmp_path: Path) -> None:
    src, other = tmp_path / "src", tmp_path / "other"
    src.mkdir()
    other.mkdir()
    (src / "out").symlink_to(other)
    (other / "back").symlink_to(other)
    with pytest.raises(SymlinkError, match="loop"):
        list(walk_source(src, follow_symlinks=True))
