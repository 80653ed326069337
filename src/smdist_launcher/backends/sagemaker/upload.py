"""The code archive: source_dir (or the entry point), dependencies and the launch plan, as SageMaker's sourcedir.tar.gz.

Unlike the SDK, version-control and cache folders are left out, and the archive is byte-for-byte reproducible
(sorted entries, fixed times and owners): the same code gives the same archive."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..storage.locations import parse_location
from ..storage.s3 import upload_file
from .request import PLAN_IN_ARCHIVE

IGNORED_NAMES = frozenset({".git", "__pycache__", ".ipynb_checkpoints"})
FIXED_MTIME = 315532800  # 1980-01-01: tools that dislike 1970 timestamps accept it


def _walk(root: Path, arc_root: str) -> Iterator[tuple[Path, str]]:
    """(file on disk, name in the archive) below root; symbolic links are followed (like the SDK), loops refused."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            raise ValueError(f"source_dir: symbolic link loop at {dirpath}")
        seen.add(real)
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        rel = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if not path.exists():
                raise FileNotFoundError(f"source_dir: {path} is a broken symbolic link; remove it or fix its target")
            yield path, (rel / name).as_posix() if not arc_root else f"{arc_root}/{(rel / name).as_posix()}"


def archive_members(source_dir: str | None, entry_point: str, dependencies: list[str] | None = None) -> list[tuple[Path, str]]:
    """What goes into the archive: source_dir's content at the root (else the entry point file alone), then each
    dependency under its base name. Paths are absolute local paths (estimator.source_dir_path / entry_point_path)."""
    if source_dir:
        members = [(p, n) for p, n in _walk(Path(source_dir), "") if n.split("/")[0] != ".smdist"]
    else:
        members = [(Path(entry_point), Path(entry_point).name)]
    for dep in dependencies or []:
        path = Path(dep)
        members += list(_walk(path, path.name)) if path.is_dir() else [(path, path.name)]
    return members


def _info(name: str, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(dest: Path, members: list[tuple[Path, str]], plan_json: str) -> Path:
    """Write the gzip tar to dest, with the plan at .smdist/launchplan.json."""
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, name in members:
            with open(path, "rb") as f:
                tar.addfile(_info(name, os.fstat(f.fileno()).st_size, os.stat(path).st_mode & 0o777), f)
        data = plan_json.encode("utf-8")
        tar.addfile(_info(PLAN_IN_ARCHIVE, len(data), 0o644), io.BytesIO(data))
    return dest


def upload_archive(s3: Any, path: Path, uri: str) -> None:
    upload_file(s3, path, parse_location(uri, field="code_location"))
