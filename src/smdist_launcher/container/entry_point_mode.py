"""Make a non-Python entry point executable on this host, as the toolkit's ``entry_point.install`` does on every host
before a runner starts (``os.chmod(<code dir>/<entry point>, 511)`` for a COMMAND entry point). MPI ranks execute
``./train.sh`` (plan/program.py) and a plain SageMaker job's Process runner ``./train`` (fallback_plan.py): a file
staged or unpacked without its execute bits would fail with "Permission denied".

Differences from the toolkit, on purpose: only the execute bits are added (511 is 0o777, which also makes the script
writable by every user), and the file is reached without following a link (contract/no_follow.py): the code dir is
the user's tree, and a runtime running as root must not change the mode of whatever a planted link names.

Stdlib only, like the rest of the runtime."""
from __future__ import annotations

import os
import stat

from ..contract.entry_point import entry_point_type
from ..contract.no_follow import open_read_nofollow

EXECUTE_BITS = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def make_executable(code_dir: str | os.PathLike[str], entry_point: str | None) -> str | None:
    """Add the execute bits to ``code_dir/entry_point`` unless it is a Python program. None when done (or nothing
    to do), else one line saying why not, for the host's console (the run goes on and its exec reports the error)."""
    if not entry_point or entry_point_type(entry_point).is_python:
        return None
    try:
        with open_read_nofollow(code_dir, entry_point) as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            if mode & EXECUTE_BITS != EXECUTE_BITS:
                os.fchmod(f.fileno(), mode | EXECUTE_BITS)
    except (OSError, ValueError) as exc:
        return f"cannot make the entry point {entry_point} executable in {code_dir}: {exc}"
    return None
