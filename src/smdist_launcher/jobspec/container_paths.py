"""Paths inside the container a job gives: every one is under /opt/ml, where the local backends map it into each
host's own tree (a leaf module: the argument models normalize with it, the rules check with it)."""
from __future__ import annotations

import posixpath

CONTAINER_ROOT = "/opt/ml"
# The folders of a host's /opt/ml the launcher fills or packs (input/config, input/data/<channel>, code, model,
# output/data, failure): a checkpoint folder at or inside one would be restored over them
LAUNCHER_FOLDERS = tuple(f"{CONTAINER_ROOT}/{name}" for name in ("input", "code", "model", "output"))


def normal_container_path(path: str | None) -> str | None:
    """An absolute container path without '..', '.' or doubled '/' (what the hosts' folders are built from: a raw
    'ckpt/../x' would follow whatever 'ckpt' is on disk); others as given, for the rules to report."""
    if path is None or not path.startswith("/") or "\x00" in path:
        return path
    return posixpath.normpath(path)


def checkpoint_local_path_problem(path: str) -> str | None:
    """checkpoint_local_path normalized must stay under /opt/ml: the local backends map it into each host's tree
    there, and a path that climbs out (/opt/ml/../../etc/cron.d) would be a folder of this machine."""
    if "\x00" in path:
        return "must not contain NUL characters"
    if not path.startswith("/"):
        return f"must be an absolute path inside the container under {CONTAINER_ROOT}, e.g. /opt/ml/checkpoints"
    normal = posixpath.normpath(path)
    if not normal.startswith(CONTAINER_ROOT + "/"):
        return (f"must be a folder below {CONTAINER_ROOT} once normalized (it is {normal!r}), e.g. "
                "/opt/ml/checkpoints: each host's checkpoint folder is inside its own /opt/ml")
    for folder in LAUNCHER_FOLDERS:
        if normal == folder or normal.startswith(folder + "/"):
            return (f"must not be inside {folder} (it is {normal!r}): the launcher fills that folder (config, "
                    "channels, code, model, outputs), and checkpoints restored into it would overwrite them; use "
                    "e.g. /opt/ml/checkpoints")
    return None
