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


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir())


@pytest.mark.parametrize("env,members,match", [
    ({"SMDIST_ARCHIVE_MAX_MEMBERS": "10"}, [({"name": f"f{i}.py"}, b"") for i in range(11)], "more than 10 members"),
    ({"SMDIST_ARCHIVE_MAX_BYTES": "1000"}, [({"name": "a.py"}, b"x" * 600), ({"name": "big.bin"}, b"\0" * 600)],
     "more than 1000 bytes unpacked"),
    ({}, [({"name": "ok.py"}, b"fine"), ({"name": "../evil.py"}, b"x")], r"contains '\.\.'"),
])
def test_refused_archive_leaves_nothing(tmp_path, monkeypatch, env, members, match):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    arc = _tar(tmp_path / "bad.tar.gz", members)
    job = tmp_path / "job"
    with pytest.raises(UnsafeArchiveError, match=match):
        prepare_code(str(arc), job / "code")
    # code/ exists (the runtime made it) and is empty; no half-unpacked folder beside it
    assert _leftovers(job) == ["code"] and _leftovers(job / "code") == []


def test_default_limits_and_bad_settings():
    from smdist_launcher.container.submit_directory import archive_limits

    assert archive_limits({}) == (100_000, 20 * 1024 ** 3)
    assert archive_limits({"SMDIST_ARCHIVE_MAX_MEMBERS": "5", "SMDIST_ARCHIVE_MAX_BYTES": "7"}) == (5, 7)
    with pytest.raises(ValueError, match=r"\$SMDIST_ARCHIVE_MAX_MEMBERS='lots': expected a positive whole number"):
        archive_limits({"SMDIST_ARCHIVE_MAX_MEMBERS": "lots"})


@pytest.mark.parametrize("name,data", [
    ("sourcedir.tar.gz", b"\x1f\x8b\x08\x00garbage that is not gzip"),   # named and shaped like one
    ("sourcedir.tar.gz", b"print('I am not an archive')\n"),              # named like one
    ("code.bin", b"\x1f\x8b\x08\x00\x00\x00\x00\x00"),                  # gzip magic, truncated
])
def test_corrupt_local_archive_is_an_error_not_a_file(tmp_path, name, data):
    from smdist_launcher.container.submit_directory import CorruptArchiveError

    (tmp_path / name).write_bytes(data)
    with pytest.raises(CorruptArchiveError, match="not a readable tar archive"):
        prepare_code(str(tmp_path / name), tmp_path / "job" / "code")
    assert _leftovers(tmp_path / "job") == ["code"] and _leftovers(tmp_path / "job" / "code") == []


def test_truncated_archive_leaves_nothing(tmp_path):
    from smdist_launcher.container.submit_directory import CorruptArchiveError

    good = _tar(tmp_path / "s.tar.gz", [({"name": f"f{i}.py"}, os.urandom(4000)) for i in range(20)])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CorruptArchiveError):
        prepare_code(str(cut), tmp_path / "job" / "code")
    assert _leftovers(tmp_path / "job" / "code") == []


def test_a_plain_script_is_still_copied(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    assert "copied" in prepare_code(str(tmp_path / "train.py"), tmp_path / "code")
    assert (tmp_path / "code" / "train.py").read_text() == "print(1)\n"
