"""Shared by the tests of work done for a job run as another user (user nobody): an interpreter that user can run,
and a snapshot of a tree that proves root changed nothing in it. (tests/ is on sys.path: `from run_as import ...`.)"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def python_for_everyone() -> tuple[str, dict[str, str]]:
    """An interpreter every user may run, with this environment's packages: ours when it is, else the system's of the
    same version (a pyenv Python under /root is not) with our package folders on PYTHONPATH. Returns the interpreter
    and the environment variables it needs."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    try:  # the way serve starts hosts as that user
        ours = subprocess.run([sys.executable, "-c", "import smdist_launcher"], user=nobody.pw_uid,
                              group=nobody.pw_gid, extra_groups=[], capture_output=True, timeout=60, cwd="/")
    except PermissionError:
        ours = None
    if ours is not None and ours.returncode == 0:
        return sys.executable, {}
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.access(system, os.X_OK):
        pytest.skip(f"no Python that user nobody can run ({sys.executable} is not, nor is {system})")
    # our folders (venv, source), not our interpreter's own standard library
    paths = [p for p in sys.path if p and Path(p).is_dir() and not p.startswith(sys.base_prefix)]
    return system, {"PYTHONPATH": os.pathsep.join(paths)}


def tree_snapshot(folder: Path) -> dict[str, tuple[int, int, int, bytes | str]]:
    """Every entry below `folder` (links not followed): mode, owner, group and content or link text."""
    out: dict[str, tuple[int, int, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            path = Path(dirpath, name)
            st = path.lstat()
            body: bytes | str = (os.readlink(path) if path.is_symlink()
                                 else path.read_bytes() if stat.S_ISREG(st.st_mode) else b"")
            out[str(path.relative_to(folder))] = (st.st_mode, st.st_uid, st.st_gid, body)
    return out
