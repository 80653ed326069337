"""Put the user's code into <root>/code: from a local dir, a tar.gz, or s3:// (boto3, lazily), extracted safely."""
from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ..contract.s3_endpoint import s3_endpoint, s3_region


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the code directory, or is a device/FIFO."""


def _inside(base: str, target: str) -> bool:
    base = os.path.realpath(base)
    return os.path.commonpath([base, os.path.realpath(target)]) == base


def check_member(member: tarfile.TarInfo, dest: str, archive: str) -> None:
    """Refuse absolute names, `..`, links leaving `dest`, devices and FIFOs (before anything is written)."""
    name = member.name
    where = f"{archive}: member {name!r}"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{where} has an absolute path; archives must hold relative paths only")
    if ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(f"{where} contains '..'; it would be written outside {dest}")
    target = os.path.join(dest, name)
    if not _inside(dest, target):
        raise UnsafeArchiveError(f"{where} resolves outside {dest} (through a symlink in the archive?)")
    if member.issym():
        link = member.linkname
        if link.startswith("/"):
            raise UnsafeArchiveError(f"{where} is a symlink to the absolute path {link!r}; only relative links inside "
                                     "the archive are allowed")
        if not _inside(dest, os.path.join(dest, posixpath.dirname(name), link)):
            raise UnsafeArchiveError(f"{where} is a symlink to {link!r}, which points outside the code directory")
    elif member.islnk():
        if member.linkname.startswith("/") or not _inside(dest, os.path.join(dest, member.linkname)):
            raise UnsafeArchiveError(f"{where} is a hard link to {member.linkname!r}, outside the code directory")
    elif member.isdev() or member.isfifo():
        raise UnsafeArchiveError(f"{where} is a device or FIFO; source archives may hold files, dirs and links only")


def safe_extract_tar(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Extract member by member; each is checked against what is already on disk (catches symlink-then-write)."""
    dest = str(dest)
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            check_member(member, dest, str(archive))
            if hasattr(tarfile, "data_filter"):
                try:
                    tar.extract(member, dest, filter="data")  # second line of defence where Python has it
                except tarfile.FilterError as e:
                    raise UnsafeArchiveError(f"{archive}: member {member.name!r} refused: {e}") from e
            else:  # pragma: no cover - Python < 3.11.4
                tar.extract(member, dest)


def _download_s3(uri: str, to: str) -> None:
    import boto3  # lazy: only s3:// submit directories need it

    bucket, _, key = uri[len("s3://"):].partition("/")
    if not bucket or not key:
        raise ValueError(f"sagemaker_submit_directory {uri!r}: expected s3://bucket/key.tar.gz")
    # The endpoint override the rest of the project honours: a MinIO/moto user never fetches code from AWS.
    boto3.client("s3", endpoint_url=s3_endpoint(), region_name=s3_region()).download_file(bucket, key, to)


def prepare_code(submit_dir: str | None, code_dir: str | os.PathLike[str]) -> str:
    """Fill `code_dir` like the toolkit's `download_and_extract`. Returns a one-line account of what happened."""
    code = Path(code_dir)
    code.mkdir(parents=True, exist_ok=True)
    if any(code.iterdir()):
        return f"code directory {code} is not empty: using it as is (submit directory not unpacked)"
    if not submit_dir:
        return f"no sagemaker_submit_directory: running from {code}"
    if submit_dir.startswith("file://"):
        submit_dir = submit_dir[len("file://"):]
    if submit_dir.startswith("s3://"):
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "sourcedir.tar.gz")
            _download_s3(submit_dir, local)
            safe_extract_tar(local, code)
        return f"unpacked {submit_dir} into {code}"
    src = Path(submit_dir)
    if src.is_dir():
        shutil.copytree(src, code, dirs_exist_ok=True)
        return f"copied {src} into {code}"
    if src.is_file() and tarfile.is_tarfile(src):
        safe_extract_tar(src, code)
        return f"unpacked {src} into {code}"
    if src.is_file():
        shutil.copy2(src, code)
        return f"copied {src} into {code}"
    raise FileNotFoundError(f"sagemaker_submit_directory {submit_dir!r} does not exist (expected a directory, "
                            "a .tar.gz or an s3:// URI)")


def install_requirements(code_dir: str | os.PathLike[str]) -> int | None:
    """`pip install -r requirements.txt` when present (toolkit behaviour). Returns pip's exit code, None if skipped."""
    req = Path(code_dir) / "requirements.txt"
    if not req.is_file():
        return None
    return subprocess.call([sys.executable, "-m", "pip", "install", "-r", str(req)], cwd=str(code_dir))
