"""The code archive: what goes in, what stays out, and that it is reproducible."""
from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from smdist_launcher.backends.sagemaker.upload import archive_members, write_archive
from smdist_launcher.backends.toolkit.source_tree import SymlinkError


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


def test_links_inside_stay_links_links_leaving_are_refused(code_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "etc_ssl"
    outside.mkdir()
    (outside / "cert.pem").write_text("not code")
    (code_dir / "pkg" / "alias.py").symlink_to("model.py")          # inside: kept as a link
    (code_dir / "models").symlink_to(code_dir / "pkg")               # inside, absolute: kept, made relative
    members = archive_members(str(code_dir), "")
    archive = write_archive(tmp_path / "a.tar.gz", members, "{}")
    with tarfile.open(archive, "r:gz") as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
        files = [m.name for m in tar.getmembers() if m.isfile()]
    assert links == {"models": "pkg", "pkg/alias.py": "model.py"}
    assert "pkg/model.py" in files and not any("cert" in f for f in files)

    (code_dir / "ssl").symlink_to(outside)                           # leaves source_dir: refused, with its path
    with pytest.raises(SymlinkError, match=f"{code_dir / 'ssl'} is a symbolic link to {outside}, outside"):
        archive_members(str(code_dir), "")
    followed = archive_members(str(code_dir), "", follow_symlinks=True)   # the user opted in: content packed
    assert "ssl/cert.pem" in [m.name for m in followed if m.link is None]

    (code_dir / "broken").symlink_to(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="broken symbolic link"):
        archive_members(str(code_dir), "", follow_symlinks=True)


def test_estimator_option_is_validated(code_dir: Path) -> None:
    from smdist_launcher import PyTorch, ValidationError

    kwargs = dict(entry_point="train.py", source_dir=str(code_dir), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    assert PyTorch(**kwargs, follow_symlinks=True).spec.follow_symlinks is True
    with pytest.raises(ValidationError, match="follow_symlinks"):
        PyTorch(**kwargs, follow_symlinks="sometimes")
