"""The hosts' model/ (and output/data/) after a job: packed into one streaming .tar.gz, or merged as a folder
(SageMaker's CompressionType NONE). Read as root from folders the job owns, so nothing here follows a link
(contract/no_follow.py: every file opened below a trusted root with O_NOFOLLOW; links, FIFOs and devices skipped).

Compression is ISA-L's deflate (python-isal, the `pack` extra) on worker threads when installed, else the stdlib's
zlib at level 1: model weights barely compress, so speed is what matters. An archive is written as NAME.partial and
renamed when complete: a stop mid-way never leaves a truncated archive under the final name, the .partial keeps the
members packed so far (on a full disk it is removed, giving the space back), and the hosts' folders are only read,
never moved or removed. A folder delivery (copy_merged) fills NAME.partial/ the same way; a sparse file stays sparse
(only its data is read and written)."""
from __future__ import annotations

import contextlib
import errno
import gzip
import os
import shutil
import stat
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ...container.full_disk import is_full_disk
from ...contract.no_follow import regular_files

PARTIAL = ".partial"
PROGRESS_AFTER_S = 3.0   # a pack that takes longer than this says how far it is ...
PROGRESS_EVERY_S = 5.0   # ... this often
_CHUNK = 8 << 20

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Folder:
    """A folder of the job's: `relative` below `root`, a folder the job cannot replace (no link below root is
    followed)."""

    root: Path
    relative: Path = Path(".")

    @property
    def path(self) -> Path:
        return self.root / self.relative


class PackingStopped(Exception):
    """Packing ended early (a stop, an error): what was packed is in `partial`, the folders are untouched."""

    def __init__(self, what: str, partial: Path, done: int, total: int, cause: BaseException) -> None:
        of = f" of {_size(total)}" if total else ""  # the total is only measured for progress
        kept = f"the part done is in {partial}" if partial.exists() else f"the part done ({partial}) was removed"
        super().__init__(f"{what} stopped after {_size(done)}{of} ({cause!r}): {kept}, the "
                         f"hosts' folders are as the job left them")
        self.partial = partial


def compressor() -> str:
    """Which deflate packs archives here: 'isal' (threads) or 'zlib'."""
    try:
        import isal.igzip_threaded  # noqa: F401
    except ImportError:
        return "zlib"
    return "isal"


def _gzip_writer(raw: BinaryIO, threads: int | None) -> Any:
    if compressor() == "isal":
        from isal import igzip_threaded

        n = threads if threads is not None else max(1, min(8, os.cpu_count() or 1))
        # ISA-L level 1 compresses like zlib -1 or better at several times its speed
        return igzip_threaded.open(raw, "wb", compresslevel=1, threads=n)
    return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0)


def _merged(folders: list[Folder]) -> Iterator[tuple[str, BinaryIO, os.stat_result]]:
    """Every regular file of `folders`, open; a later folder's file replaces an earlier one's of the same name, and
    also a file of an earlier folder where it has a folder of that name (`x` against `x/y`), or the other way round:
    no folder could hold both."""
    files: set[str] = set()
    parents: set[str] = set()  # every folder that holds a file taken
    for folder in reversed(folders):
        for rel, f, st in regular_files(folder.root, folder.relative):
            above = [rel.rsplit("/", n)[0] for n in range(1, rel.count("/") + 1)]
            if rel in files or rel in parents or any(a in files for a in above):
                continue
            files.add(rel)
            parents.update(above)
            yield rel, f, st


def total_bytes(folders: list[Folder]) -> int:
    """The size of the regular files below `folders` (lstat only: nothing opened, nothing followed; for progress)."""
    total = 0
    for folder in folders:
        if not _no_link_below_root(folder):  # regular_files will refuse it too; its size is none of our business
            continue
        for parent, _dirs, files in os.walk(folder.path):
            for name in files:
                try:
                    st = os.lstat(os.path.join(parent, name))
                except OSError:
                    continue
                total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def _no_link_below_root(folder: Folder) -> bool:
    path = folder.root
    for name in folder.relative.parts:
        path = path / name
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        except OSError:
            return False
    return True


class _Meter:
    def __init__(self, what: str, total: int, progress: Progress | None) -> None:
        self.what, self.total, self.progress = what, total, progress
        self.done = 0
        self.start = time.monotonic()
        self.next_at = self.start + PROGRESS_AFTER_S

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.progress is not None and now >= self.next_at:
            self.next_at = now + PROGRESS_EVERY_S
            rate = self.done / max(now - self.start, 1e-9)
            pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
            self.progress(f"{self.what}: {_size(self.done)} of {_size(self.total)}{pct}, {_size(rate)}/s")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


class _MeteredReader:
    """A file read by tarfile, counted for progress."""

    def __init__(self, f: BinaryIO, meter: _Meter) -> None:
        self.f, self.meter = f, meter

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.meter.add(len(data))
        return data


def pack(folders: list[Folder], tar_path: Path, *, progress: Progress | None = None,
         threads: int | None = None) -> int:
    """The merged regular files of `folders` as the gzipped tar `tar_path` (streamed: nothing held in memory);
    returns the file count, 0 (and no archive) when there is none."""
    what = f"packing {tar_path.name}"
    meter = _Meter(what, total_bytes(folders) if progress is not None else 0, progress)
    partial = tar_path.with_name(tar_path.name + PARTIAL)
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    raw = open(partial, "wb")  # noqa: SIM115 - closed below, also when a stop interrupts
    try:
        gz = _gzip_writer(raw, threads)
        try:
            with tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for rel, f, st in _merged(folders):
                    info = tarfile.TarInfo(rel)
                    info.size, info.mtime, info.mode = st.st_size, int(st.st_mtime), stat.S_IMODE(st.st_mode)
                    tar.addfile(info, _MeteredReader(f, meter))
                    count += 1
        finally:
            gz.close()
        raw.close()  # its last buffer is written here: a full disk may show only now
    except BaseException as exc:
        with contextlib.suppress(OSError):  # the buffer's write fails again on a full disk: the first error is told
            raw.close()
        if not isinstance(exc, Exception):  # Ctrl-C, SystemExit: theirs to handle, the .partial stays all the same
            raise
        if is_full_disk(exc):  # only a copy of the hosts' folders: its space is what the record and logs need
            partial.unlink(missing_ok=True)
        raise PackingStopped(what, partial, meter.done, meter.total, exc) from exc
    if count == 0:
        partial.unlink()
        return 0
    os.replace(partial, tar_path)
    if progress is not None and time.monotonic() - meter.start >= PROGRESS_AFTER_S:
        progress(f"{what}: {count} file(s), {_size(meter.done)} in {time.monotonic() - meter.start:.1f} s")
    return count


def copy_merged(folders: list[Folder], dest: Path, *, progress: Progress | None = None) -> int:
    """The merged regular files of `folders` copied into the folder `dest` (ours: created, never a link), as they
    are (SageMaker's uncompressed outputs); returns the file count. They are copied into DEST.partial/, renamed to
    `dest` when complete: a stop keeps the files copied so far there, and never leaves a folder under the final name
    that holds a truncated file; collecting again reuses it."""
    what = f"copying {dest.name}"
    meter = _Meter(what, total_bytes(folders) if progress is not None else 0, progress)
    partial = dest.with_name(dest.name + PARTIAL)
    count = 0
    try:
        for rel, f, st in _merged(folders):
            target = partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            with open(target, "wb") as out:
                _copy_data(f.fileno(), out.fileno(), st.st_size, meter)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.chmod(target, stat.S_IMODE(st.st_mode) & 0o777)
            count += 1
    except Exception as exc:  # a stop (Interrupted): what was copied stays in partial
        if is_full_disk(exc):  # as in pack: the space back for the record and logs
            shutil.rmtree(partial, ignore_errors=True)
        raise PackingStopped(what, partial, meter.done, meter.total, exc) from exc
    if count == 0:
        shutil.rmtree(partial, ignore_errors=True)
        return 0
    if dest.is_dir() and not dest.is_symlink():  # an earlier complete delivery of the same hosts' folders
        shutil.rmtree(dest)
    os.replace(partial, dest)
    return count


_NO_RANGE_COPY = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF)


def _copy_data(src: int, dst: int, size: int, meter: _Meter) -> None:
    """The `size` bytes of `src` into the empty `dst`: only the data runs (SEEK_DATA/SEEK_HOLE), so a hole stays a
    hole; each run copied in-kernel (copy_file_range, else pread/pwrite) in chunks, so progress and a stop are seen."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
            end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from offset on
                break
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            start, end = offset, size  # no hole information here: all of it is data
        if not _copy_range(src, dst, start, end, meter):
            break
        offset = end
    os.ftruncate(dst, size)


def _copy_range(src: int, dst: int, start: int, end: int, meter: _Meter) -> bool:
    """Bytes [start, end) of src to the same offsets of dst; False when src ended earlier."""
    pos = start
    copy: Any = getattr(os, "copy_file_range", None)
    while pos < end:
        n = min(_CHUNK, end - pos)
        if copy is not None:
            try:
                done = copy(src, dst, n, pos, pos)
            except OSError as exc:
                if exc.errno not in _NO_RANGE_COPY:
                    raise
                copy = None
                continue
        else:
            data = os.pread(src, n, pos)
            done = os.pwrite(dst, data, pos) if data else 0
        if done == 0:
            return False
        meter.add(done)
        pos += done
    return True
