"""Hand a host over to another user (serve --run-as): the work done here with more privilege than the job's, so it
never follows a link that user could plant (the folders it hands over are theirs once handed over)."""
from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from ...contract.no_follow import chown_tree

_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def hand_over(env: dict[str, str], host_dir: Path, tmp_root: Path, user_name: str) -> None:
    """Make a host runnable as `user_name`: its folder and the job's temporary folder owned by that user (chowned
    without following a link), HOME there (ours is not theirs to read), and the loopback library copied where that
    user can load it (ours lives in our cache, which may be private: an unloadable preload would quietly leave ports
    on every address). `env` is changed in place. OSError when either folder was swapped for a link."""
    user = pwd.getpwnam(user_name)
    for root in (host_dir, tmp_root):
        os.close(os.open(root, _DIR_NOFOLLOW))  # a folder replaced by a link is not entered (ELOOP)
    preload = env.get("LD_PRELOAD", "").split()
    if preload:
        library = _copy_library(Path(preload[0]), tmp_root, user.pw_uid, user.pw_gid)
        env["LD_PRELOAD"] = " ".join([str(library), *preload[1:]])
    for root in (host_dir, tmp_root):
        chown_tree(root, user.pw_uid, user.pw_gid)
    env["HOME"] = str(host_dir)
    env.pop("XDG_CACHE_HOME", None)


def _copy_library(source: Path, folder: Path, uid: int, gid: int) -> Path:
    """A fresh copy of `source` in `folder`, owned by the user: whatever has its name there (a link the user planted,
    an earlier host's copy) is unlinked, never written through."""
    fd_dir = os.open(folder, _DIR_NOFOLLOW)
    try:
        try:
            os.unlink(source.name, dir_fd=fd_dir)
        except FileNotFoundError:
            pass
        fd = os.open(source.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755,
                     dir_fd=fd_dir)
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
            os.fchmod(out.fileno(), 0o755)
            os.fchown(out.fileno(), uid, gid)
    finally:
        os.close(fd_dir)
    return folder / source.name
