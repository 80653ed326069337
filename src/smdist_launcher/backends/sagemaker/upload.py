"""The code archive: source_dir (or the entry point), dependencies and the launch plan, as SageMaker's sourcedir.tar.gz.

Unlike the SDK, version-control and cache folders are left out, and the archive is byte-for-byte reproducible
(sorted entries, fixed times and owners): the same code gives the same archive."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path
from typing import Any

from ..storage.locations import parse_location
from ..storage.s3 import upload_file
from ..toolkit.source_tree import SourceEntry, walk_source
from .request import PLAN_IN_ARCHIVE

FIXED_MTIME = 315532800  # 1980-01-01: tools that dislike 1970 timestamps accept it


def archive_members(source_dir: str | None, entry_point: str, dependencies: list[str] | None = None, *,
                    follow_symlinks: bool = False) -> list[SourceEntry]:
    """What goes into the archive: source_dir's content at the root (else the entry point file alone), then each
    dependency under its base name. Paths are absolute local paths (estimator.source_dir_path / entry_point_path).
    Symbolic links: backends/toolkit/source_tree.py (links inside stay links; links leaving refused unless followed)."""
    if source_dir:
        members = [e for e in walk_source(Path(source_dir), follow_symlinks=follow_symlinks)
                   if e.name.split("/")[0] != ".smdist"]
    else:
        members = [SourceEntry(Path(entry_point), Path(entry_point).name)]
    for dep in dependencies or []:
        path = Path(dep)
        members += (list(walk_source(path, path.name, follow_symlinks=follow_symlinks, what="dependencies"))
                    if path.is_dir() else [SourceEntry(path, path.name)])
    return members


def _info(name: str, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(dest: Path, members: list[SourceEntry], plan_json: str) -> Path:
    """Write the gzip tar to dest, with the plan at .smdist/launchplan.json."""
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            path, name = member.path, member.name
            if member.link is not None:
                info = _info(name, 0, 0o777)
                info.type, info.linkname = tarfile.SYMTYPE, member.link
                tar.addfile(info)
                continue
            with open(path, "rb") as f:
                tar.addfile(_info(name, os.fstat(f.fileno()).st_size, os.stat(path).st_mode & 0o777), f)
        data = plan_json.encode("utf-8")
        tar.addfile(_info(PLAN_IN_ARCHIVE, len(data), 0o644), io.BytesIO(data))
    return dest


def upload_archive(s3: Any, path: Path, uri: str) -> None:
    upload_file(s3, path, parse_location(uri, field="code_location"))
