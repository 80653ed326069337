"""hand_over (serve --run-as): the host's folder and the temporary folder owned by the user, links left as they are,
HOME in the host's folder, the preloaded library copied where the user can load it."""
from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from smdist_launcher.backends.local.hand_over import hand_over


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_host_is_handed_over_without_following_links(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    host, tmp, shared = tmp_path / "host", tmp_path / "tmp", tmp_path / "shared.csv"
    host.mkdir()
    tmp.mkdir()
    shared.write_text("data")
    (host / "train.csv").symlink_to(shared)
    (host / "code").mkdir()
    library = tmp_path / "libloopback.so"
    library.write_text("elf")
    env = {"LD_PRELOAD": f"{library} other.so", "XDG_CACHE_HOME": "/root/.cache"}
    hand_over(env, host, tmp, "nobody")
    assert (host / "code").stat().st_uid == nobody.pw_uid and tmp.stat().st_uid == nobody.pw_uid
    assert shared.stat().st_uid == 0  # the link's target stays ours
    assert env["HOME"] == str(host) and "XDG_CACHE_HOME" not in env
    assert env["LD_PRELOAD"] == f"{tmp / library.name} other.so" and (tmp / library.name).is_file()
