"""Put the user's code into <root>/code: from a local dir, a tar.gz, or s3:// (boto3, lazily), extracted safely.

An archive is unpacked into a temporary folder beside code/ and renamed into place only when every member passed:
a refused or corrupt archive leaves nothing. Limits (environment, see docs/security.md): at most
$SMDIST_ARCHIVE_MAX_MEMBERS members (100,000) and $SMDIST_ARCHIVE_MAX_BYTES bytes unpacked (20 GiB)."""
from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

from ..contract.s3_endpoint import s3_endpoint, s3_region

MAX_MEMBERS_ENV = "SMDIST_ARCHIVE_MAX_MEMBERS"
MAX_BYTES_ENV = "SMDIST_ARCHIVE_MAX_BYTES"
DEFAULT_MAX_MEMBERS = 100_000
DEFAULT_MAX_BYTES = 20 * 1024 ** 3
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the code directory, or is a device/FIFO; or the archive is over a limit."""


class CorruptArchiveError(ValueError):
    """The file is (named or shaped like) an archive but cannot be read as one."""


def archive_limits(environ: dict[str, str] | None = None) -> tuple[int, int]:
    """(max members, max unpacked bytes) from the environment, else the defaults."""
    env = os.environ if environ is None else environ
    out = []
    for name, default in ((MAX_MEMBERS_ENV, DEFAULT_MAX_MEMBERS), (MAX_BYTES_ENV, DEFAULT_MAX_BYTES)):
        text = (env.get(name) or "").strip()
        try:
            value = int(text) if text else default
        except ValueError:
            value = -1
        if value < 1:
            raise ValueError(f"${name}={text!r}: expected a positive whole number (default {default})")
        out.append(value)
    return out[0], out[1]


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
    """Extract member by member into a temporary folder beside `dest` (each member checked against what is already
    on disk: catches symlink-then-write; counted and sized against archive_limits()), then rename it to `dest`,
    which must be missing or empty. On any refusal or read error nothing of the archive is left."""
    max_members, max_bytes = archive_limits()
    final = Path(dest)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{final.name}.unpacking-", dir=final.parent)  # same filesystem: rename
    try:
        _extract_members(str(archive), staging, max_members, max_bytes)
        os.chmod(staging, 0o755)
        if final.exists():
            final.rmdir()  # empty (prepare_code checked); a non-empty one raises instead of being mixed into
        os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract_members(archive: str, dest: str, max_members: int, max_bytes: int) -> None:
    members = size = 0
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                members += 1
                size += member.size if member.isreg() else 0
                if members > max_members:
                    raise UnsafeArchiveError(f"{archive}: more than {max_members} members; raise ${MAX_MEMBERS_ENV} "
                                             "if this is really your code")
                if size > max_bytes:
                    raise UnsafeArchiveError(f"{archive}: more than {max_bytes} bytes unpacked (at member "
                                             f"{member.name!r}); raise ${MAX_BYTES_ENV} if this is really your code")
                check_member(member, dest, archive)
                if hasattr(tarfile, "data_filter"):
                    try:
                        tar.extract(member, dest, filter="data")  # second line of defence where Python has it
                    except tarfile.FilterError as e:
                        raise UnsafeArchiveError(f"{archive}: member {member.name!r} refused: {e}") from e
                else:  # pragma: no cover - Python < 3.11.4
                    tar.extract(member, dest)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        if isinstance(e, OSError) and e.errno is not None:  # the disk, not the archive (ENOSPC, EACCES, ...)
            raise
        raise CorruptArchiveError(f"{archive}: not a readable tar archive ({type(e).__name__}: {e}); "
                                  "sagemaker_submit_directory must be a .tar.gz made by tar or the SDK") from e


def _is_archive(path: Path) -> bool:
    """Named like one, compressed, or a plain tar: then it must unpack (a corrupt one is an error, not a script)."""
    if path.name.endswith(_ARCHIVE_SUFFIXES):
        return True
    with open(path, "rb") as f:
        head = f.read(8)
    return head.startswith(_COMPRESSED_MAGIC) or tarfile.is_tarfile(path)


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
    if src.is_file() and _is_archive(src):
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
