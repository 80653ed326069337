import io
import os
import tarfile

import pytest

from smdist_launcher.container.submit_directory import UnsafeArchiveError, prepare_code, safe_extract_tar


def _tar(path, members):
    """members: list of (TarInfo-kwargs, data or None)."""
    with tarfile.open(path, "w:gz") as tar:
        for kw, data in members:
            info = tarfile.TarInfo(kw.pop("name"))
            for k, v in kw.items():
                setattr(info, k, v)
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def test_good_archive(tmp_path):
    arc = _tar(tmp_path / "s.tar.gz", [({"name": "train.py"}, b"print(1)"), ({"name": "pkg/m.py"}, b""),
                                      ({"name": "link", "type": tarfile.SYMTYPE, "linkname": "pkg/m.py"}, None)])
    dest = tmp_path / "code"
    assert "unpacked" in prepare_code(str(arc), dest)
    assert (dest / "train.py").read_text() == "print(1)" and os.path.islink(dest / "link")


@pytest.mark.parametrize("members,match", [
    ([({"name": "../x"}, b"")], r"contains '\.\.'"),
    ([({"name": "a/../../x"}, b"")], r"contains '\.\.'"),
    ([({"name": "/etc/x"}, b"")], "absolute path"),
    ([({"name": "l", "type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, None)], "symlink to the absolute path"),
    ([({"name": "l", "type": tarfile.SYMTYPE, "linkname": "../../x"}, None)], "points outside"),
    ([({"name": "d", "type": tarfile.SYMTYPE, "linkname": "."}, None),
      ({"name": "e", "type": tarfile.SYMTYPE, "linkname": ".."}, None)], "points outside"),
    ([({"name": "h", "type": tarfile.LNKTYPE, "linkname": "../outside"}, None)], "hard link"),
    ([({"name": "dev", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, None)], "device or FIFO"),
    ([({"name": "fifo", "type": tarfile.FIFOTYPE}, None)], "device or FIFO"),
])
def test_unsafe_archives_refused(tmp_path, members, match):
    arc = _tar(tmp_path / "bad.tar.gz", members)
    dest = tmp_path / "job" / "code"
    with pytest.raises(UnsafeArchiveError, match=match):
        safe_extract_tar(arc, dest)
    assert not (tmp_path / "x").exists() and not (tmp_path / "job" / "x").exists()


def test_symlink_then_write_through_it_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    arc = _tar(tmp_path / "bad.tar.gz", [({"name": "esc", "type": tarfile.SYMTYPE, "linkname": str(outside)}, None),
                                        ({"name": "esc/pwned", }, b"x")])
    with pytest.raises(UnsafeArchiveError):
        safe_extract_tar(arc, tmp_path / "code")
    assert not (outside / "pwned").exists()


def test_local_dir_copy_skip_nonempty_and_missing(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("x")
    code = tmp_path / "code"
    assert "copied" in prepare_code(f"file://{src}", code)
    assert (code / "train.py").read_text() == "x"
    (src / "train.py").write_text("changed")
    assert "not empty" in prepare_code(str(src), code)  # toolkit: a non-empty code dir is used as is
    assert (code / "train.py").read_text() == "x"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prepare_code(str(tmp_path / "nope"), tmp_path / "code2")
