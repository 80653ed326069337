"""hand_over (serve --run-as): root makes a host runnable as another user; it follows no link that user could plant
in the folders it hands over (issue 28)."""
from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path

import pytest

from smdist_launcher.backends.local.hand_over import hand_over

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


def _folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    host_dir = tmp_path / "job" / "hosts" / "algo-1"
    host_dir.mkdir(parents=True)
    tmp_root = Path(tempfile.mkdtemp(prefix="smdist-", dir=tmp_path))
    library = tmp_path / "libloopback.so"
    library.write_bytes(b"\x7fELF library")
    return host_dir, tmp_root, library


def test_the_library_copy_follows_no_link_the_user_planted_in_the_tmp_folder(tmp_path):
    """Another process of the run-as user (another job, or what an earlier attempt left running) owns the handed-over
    tmp folder and plants the library's name there as a link: root creates no file where it points."""
    host_dir, tmp_root, library = _folders(tmp_path)
    target = tmp_path / "root-only" / "ld.so.preload"
    target.parent.mkdir()
    (tmp_root / library.name).symlink_to(target)
    env = {"LD_PRELOAD": str(library)}
    hand_over(env, host_dir, tmp_root, "nobody")
    assert not target.exists()
    copied = tmp_root / library.name  # the link was replaced by the library
    assert not copied.is_symlink() and copied.read_bytes() == library.read_bytes()
    assert env["LD_PRELOAD"] == str(copied)


def test_the_library_is_copied_owned_by_the_user_and_loadable(tmp_path):
    host_dir, tmp_root, library = _folders(tmp_path)
    env = {"LD_PRELOAD": f"{library} /other.so", "XDG_CACHE_HOME": "/root/.cache"}
    hand_over(env, host_dir, tmp_root, "nobody")
    copied = tmp_root / library.name
    nobody = pwd.getpwnam("nobody")
    assert copied.read_bytes() == library.read_bytes() and not copied.is_symlink()
    st = copied.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (nobody.pw_uid, 0o755)
    assert (tmp_root.stat().st_uid, host_dir.stat().st_uid) == (nobody.pw_uid, nobody.pw_uid)
    assert env["LD_PRELOAD"] == f"{copied} /other.so" and env["HOME"] == str(host_dir)
    assert "XDG_CACHE_HOME" not in env
    hand_over(env | {"LD_PRELOAD": str(library)}, host_dir, tmp_root, "nobody")  # the next host: already there
    assert copied.read_bytes() == library.read_bytes()


def test_a_tmp_folder_swapped_for_a_link_is_not_entered(tmp_path):
    """The user owns the tmp folder once handed over, so in a sticky /tmp it may rename it and leave a link in its
    place before the next host's hand-over: root neither chowns nor writes where that link points."""
    host_dir, tmp_root, library = _folders(tmp_path)
    hand_over({"LD_PRELOAD": str(library)}, host_dir, tmp_root, "nobody")
    elsewhere = tmp_path / "root-only"
    elsewhere.mkdir()
    tmp_root.rename(tmp_path / "moved")
    tmp_root.symlink_to(elsewhere)
    with pytest.raises(OSError):
        hand_over({"LD_PRELOAD": str(library)}, host_dir, tmp_root, "nobody")
    assert list(elsewhere.iterdir()) == [] and elsewhere.stat().st_uid == 0
