"""The code archive: what goes in, what stays out, and that it is reproducible."""
from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from smdist_launcher.backends.sagemaker.upload import archive_members, write_archive


def _names(archive: Path) -> list[str]:
    with tarfile.open(archive, "r:gz") as tar:
        return tar.getnames()


def test_source_dir_with_plan_and_dependencies(code_dir: Path, tmp_path: Path) -> None:
    dep = tmp_path / "shared_lib"
    dep.mkdir()
    (dep / "util.py").write_text("Y = 2\n")
    (code_dir / ".smdist").mkdir()
    (code_dir / ".smdist" / "launchplan.json").write_text("stale")  # the user's copy is replaced by ours
    members = archive_members(str(code_dir), str(code_dir / "train.py"), [str(dep)])
    archive = write_archive(tmp_path / "a.tar.gz", members, '{"plan": 1}')
    assert _names(archive) == ["train.py", "pkg/model.py", "shared_lib/util.py", ".smdist/launchplan.json"]
    with tarfile.open(archive, "r:gz") as tar:
        assert tar.extractfile(".smdist/launchplan.json").read() == b'{"plan": 1}'
    again = write_archive(tmp_path / "b.tar.gz", archive_members(str(code_dir), str(code_dir / "train.py"), [str(dep)]),
                          '{"plan": 1}')
    assert archive.read_bytes() == again.read_bytes()


def test_entry_point_alone_without_source_dir(code_dir: Path, tmp_path: Path) -> None:
    members = archive_members(None, str(code_dir / "train.py"))
    assert _names(write_archive(tmp_path / "a.tar.gz", members, "{}")) == ["train.py", ".smdist/launchplan.json"]


def test_symlinks_are_followed_and_broken_ones_reported(code_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("d")
    (code_dir / "link.txt").symlink_to(tmp_path / "data.txt")
    assert ("link.txt" in [n for _, n in archive_members(str(code_dir), "")])
    (code_dir / "broken").symlink_to(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="broken symbolic link"):
        archive_members(str(code_dir), "")
