"""File work done with more privilege than a job's, inside a folder the job owns, that never follows a link.

A job's code may replace any name in its own tree by a symbolic link (`input/config -> /etc`,
`hyperparameters.json -> /etc/shadow`) at any moment, also between our check and our use. So nothing here checks a
path and then uses it: the trusted `root` (a folder the job cannot rename or replace: its parent is not the job's)
is opened once, every component below it is opened relative to its parent's descriptor with
`O_NOFOLLOW|O_DIRECTORY`, and the last one with `O_NOFOLLOW` (reads also refuse anything but a regular file: a FIFO
would block us forever). A link anywhere below `root` makes the operation fail (`OSError` ELOOP/ENOTDIR) or, for
tree walks, is skipped or copied as a link, never dereferenced. Writes are atomic: a temp file with a random name,
created `O_CREAT|O_EXCL|O_NOFOLLOW` beside the target, then renamed over it within the same directory descriptor; the
name says which process wrote it, so that one left by a killed writer can be swept (write_temps.py,
sweep_stale_temps). An error names the whole path it happened at (a write on a descriptor names none): a job's
failure reason must say where.

Runtime-safe: stdlib only."""
from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from .write_temps import is_stale, temp_name

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_CHUNK = 1 << 20
# The most we read into memory of one file a job wrote (its failure.json, a rank's stack dump): far above what the
# runtime writes there, far below what a job could put in a file it owns (a whole disk).
HOST_FILE_LIMIT = 16 << 20
READ_PIECE = 1 << 16  # what a bounded read takes at a time
# The deepest folder a tree walk enters: far deeper than any tree we stage, far below Python's recursion limit and our
# descriptor limit (a walk holds one per level); a job may nest folders without end, which fails with an OSError.
MAX_DEPTH = 256


def _components(relative: str | os.PathLike[str]) -> list[str]:
    """The names of `relative`, each a single path component; an absolute path or `..` is refused (it would leave
    the trusted root by name, which no descriptor walk can guard)."""
    rel = PurePosixPath(os.fspath(relative))
    if rel.is_absolute():
        raise ValueError(f"{os.fspath(relative)!r}: must be relative to the trusted root")
    parts = [p for p in rel.parts if p != "."]
    if ".." in parts:
        raise ValueError(f"{os.fspath(relative)!r}: '..' is not allowed below a trusted root")
    return parts


def _open_root(root: str | os.PathLike[str]) -> int:
    # The root itself is trusted (the launcher made it and the job cannot replace it): it may sit below links of the
    # machine's own layout (a symlinked home), so it is opened as it is.
    return os.open(os.fspath(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _naming(exc: OSError, path: str | os.PathLike[str]) -> None:
    """Let `exc` name the whole `path` where it names no file, or only a name relative to a descriptor (a write, a
    read, an os.open(dir_fd=)): a reason must say where it failed, not only that it did."""
    if not isinstance(exc.filename, str) or not os.path.isabs(exc.filename):
        exc.filename = os.fspath(path)


def _descend(fd: int, names: list[str], *, create: bool, mode: int = 0o755, shown: str | None = None) -> int:
    """The descriptor of folder fd/names..., each opened without following a link; closes `fd`. `shown`: the path
    of `fd`, for an error to name the folder it failed at."""
    done = 0
    try:
        for name in names:
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
            done += 1
    except OSError as exc:
        os.close(fd)
        if shown is not None:
            _naming(exc, os.path.join(shown, *names[:done + 1]))
        raise
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str] = ".", *,
                      create: bool = False) -> int:
    """A descriptor of folder root/relative (created with its parents when `create`); no link below root followed."""
    return _descend(_open_root(root), _components(relative), create=create, shown=os.fspath(root))


def open_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], flags: int,
                  mode: int = 0o600) -> int:
    """os.open of root/relative without following a link in any component below root. With O_CREAT the missing
    parent folders are created too."""
    names = _components(relative)
    if not names:
        raise ValueError(f"{os.fspath(relative)!r}: names no file below the root")
    parent = open_dir_nofollow(root, PurePosixPath(*names[:-1]) if len(names) > 1 else ".",
                               create=bool(flags & os.O_CREAT))
    try:
        return os.open(names[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


def _open_regular(name: str, dir_fd: int) -> tuple[int, os.stat_result]:
    """Open a regular file for reading: not a link, and not a FIFO or device. What the name is, is checked on an
    O_PATH descriptor, which opens nothing (opening a device can arm a watchdog, rewind a tape or give a daemon a
    controlling terminal; a FIFO would wait for a writer), then that same file is opened through /proc. Without
    O_PATH (not Linux): O_NONBLOCK so that a FIFO does not wait, then fstat refuses it."""
    path_flag = getattr(os, "O_PATH", 0)
    if path_flag and os.path.isdir("/proc/self/fd"):
        pinned = os.open(name, path_flag | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            st = os.fstat(pinned)
            if stat.S_ISLNK(st.st_mode):  # O_PATH|O_NOFOLLOW opens a link itself rather than failing
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", name)
            fd = os.open(f"/proc/self/fd/{pinned}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        finally:
            os.close(pinned)
        return fd, st
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_read_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str]) -> BinaryIO:
    """Regular file root/relative opened for reading (binary); a link anywhere below root, a FIFO or a device
    raises OSError, a missing file FileNotFoundError."""
    names = _components(relative)
    if not names:
        raise ValueError(f"{os.fspath(relative)!r}: names no file below the root")
    parent = open_dir_nofollow(root, PurePosixPath(*names[:-1]) if len(names) > 1 else ".")
    try:
        fd, _ = _open_regular(names[-1], parent)
    finally:
        os.close(parent)
    return os.fdopen(fd, "rb")


def read_bytes_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str],
                        limit: int | None = None) -> bytes:
    """The bytes of regular file root/relative; a link or special file raises OSError, and so does one of more than
    `limit` bytes (EFBIG: a job may fill a file it owns up to its disk; we read none of it into memory)."""
    with open_read_nofollow(root, relative) as f:
        if limit is None:
            return f.read()
        # Not read(limit + 1): that allocates the whole limit (16 MiB for a host file) for a file of a few bytes.
        # The size fstat gives, plus one byte, in one read: the file held once (pieces joined would hold it twice).
        # That size is only a hint, the file may still grow: what follows it is read in pieces, up to the bound.
        first = f.read(min(os.fstat(f.fileno()).st_size, limit) + 1)
        pieces, total = [first], len(first)
        while total <= limit and (piece := f.read(min(READ_PIECE, limit + 1 - total))):
            pieces.append(piece)
            total += len(piece)
        if total > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", os.fspath(Path(root, relative)))
        return b"".join(pieces)


def read_tail_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], limit: int) -> bytes:
    """The last `limit` bytes (at most) of regular file root/relative; a link or special file raises OSError."""
    with open_read_nofollow(root, relative) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
        return f.read(limit)


def read_json_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], default: Any = None,
                       limit: int | None = None) -> Any:
    """JSON of root/relative; `default` when it does not exist. A link (anywhere below root) raises OSError, and so
    does a file of more than `limit` bytes."""
    try:
        data = read_bytes_nofollow(root, relative, limit)
    except FileNotFoundError:
        return default
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise ValueError(f"{Path(root, relative)}: not valid JSON ({e}); the SageMaker contract needs a JSON "
                         "object here") from e


def write_bytes_at(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Atomically replace `name` in the folder `dir_fd` with `data`: a fresh temp file of a random name that cannot
    be a planted link (O_EXCL|O_NOFOLLOW), renamed over `name` (a link at `name` is replaced, not followed)."""
    write_stream_at(dir_fd, name, (data,), mode)


def write_bytes_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], data: bytes,
                         mode: int = 0o644) -> None:
    """Atomic write of root/relative (parents created); no link below root followed."""
    write_stream_nofollow(root, relative, (data,), mode)


def write_stream_at(dir_fd: int, name: str, chunks: Iterable[bytes], mode: int = 0o644) -> None:
    """write_bytes_at for data that arrives in chunks (a download): the temp file is complete before the rename."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"{name!r}: not a single file name")
    tmp = temp_name()  # its writer in its name: a sweep removes it only once this process is gone
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def write_stream_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], chunks: Iterable[bytes],
                          mode: int = 0o644) -> None:
    """Atomic write of root/relative from `chunks` (parents created); no link below root followed."""
    names = _components(relative)
    if not names:
        raise ValueError(f"{os.fspath(relative)!r}: names no file below the root")
    try:
        parent = open_dir_nofollow(root, PurePosixPath(*names[:-1]) if len(names) > 1 else ".", create=True)
        try:
            write_stream_at(parent, names[-1], chunks, mode)
        finally:
            os.close(parent)
    except OSError as exc:
        _naming(exc, os.path.join(root, *names))
        raise


def _chunks(f: BinaryIO, path: str | os.PathLike[str]) -> Iterator[bytes]:
    """The bytes of `f` in chunks; a read error names `path`, the file read (not the one being written)."""
    while True:
        try:
            chunk = f.read(_COPY_CHUNK)
        except OSError as exc:
            _naming(exc, path)
            raise
        if not chunk:
            return
        yield chunk


def copy_into(src: Path, root: str | os.PathLike[str], relative: str | os.PathLike[str], *,
              skip: Callable[[str], bool] | None = None) -> int:
    """Copy the regular files of our folder `src` into the job-owned folder root/relative (created if missing),
    each written atomically without following a link the job planted there; returns the count. Links in `src` are
    skipped like in every copy of a job's files, and so is a file whose name `skip` answers True for."""
    count = 0
    for rel, f, st in regular_files(src, skip=skip):
        write_stream_nofollow(root, PurePosixPath(os.fspath(relative), rel), _chunks(f, src / rel),
                              stat.S_IMODE(st.st_mode) & 0o777)
        count += 1
    return count


def dump_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True).encode("utf-8")


def write_json_nofollow(root: str | os.PathLike[str], relative: str | os.PathLike[str], data: Any,
                        mode: int = 0o644) -> None:
    """Atomic JSON write of root/relative (parents created); no link below root followed."""
    write_bytes_nofollow(root, relative, dump_json(data), mode)


# ---- trees --------------------------------------------------------------------------------------
def _too_deep(rel: str) -> OSError:
    shown = rel if len(rel) <= 200 else f"{rel[:200]}..."
    return OSError(errno.ENAMETOOLONG, f"more than {MAX_DEPTH} folders deep: not walked", shown)


def _walk(dir_fd: int, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, str, int, os.DirEntry[str]]]:
    """(relative path, name, parent descriptor, entry) of everything below `dir_fd`, parents first. Folders are
    entered by descriptor with O_NOFOLLOW, so a folder swapped for a link while we walk is not entered. A tree
    deeper than MAX_DEPTH raises OSError."""
    with os.scandir(dir_fd) as it:
        entries = list(it)
    for entry in entries:
        rel = f"{prefix}{entry.name}"
        yield rel, entry.name, dir_fd, entry
        if entry.is_dir(follow_symlinks=False):
            if depth >= MAX_DEPTH:
                raise _too_deep(rel)
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:  # gone, or swapped for a link/file since the listing: not ours to enter
                continue
            try:
                yield from _walk(child, rel + "/", depth + 1)
            finally:
                os.close(child)


def remove_at(dir_fd: int, name: str, _depth: int = 0) -> None:
    """Remove `name` from the folder `dir_fd`, whatever it is: a folder with everything in it (entered by descriptor,
    links inside unlinked, never followed), a link, a file. Missing: nothing to do. A tree deeper than MAX_DEPTH
    raises OSError. (shutil.rmtree's dir_fd needs Python 3.11.)"""
    if _depth > MAX_DEPTH:
        raise _too_deep(name)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        with os.scandir(fd) as it:
            names = [entry.name for entry in it]
        for child in names:
            remove_at(fd, child, _depth + 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """chown -R root to uid:gid without following links: links themselves are chowned (lchown), never their
    targets (a staged channel is a link to shared data, left as it is). A root-owned file of several hard links is
    left alone: without fs.protected_hardlinks it could be a planted hard link to any file of this machine."""
    fd = os.open(os.fspath(root), _DIR_FLAGS)
    try:
        os.chown(fd, uid, gid)
        for _rel, name, parent, entry in _walk(fd):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and _planted_hard_link(st, uid):
                continue
            try:
                os.chown(name, uid, gid, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                continue
    finally:
        os.close(fd)


def _planted_hard_link(st: os.stat_result, owner: int) -> bool:
    """A regular file of several hard links that the tree's owner does not own: without fs.protected_hardlinks a job
    can hard-link any file of this machine into its tree (/etc/shadow), and reading it with more privilege than the
    job's would hand it over. The job's own hard links (its uid) are kept."""
    return st.st_nlink > 1 and st.st_uid != owner


def regular_files(root: str | os.PathLike[str], relative: str | os.PathLike[str] = ".", *,
                  skip: Callable[[str], bool] | None = None) -> Iterator[tuple[str, BinaryIO, os.stat_result]]:
    """(path relative to root/relative, open file, its stat) of every regular file below root/relative, sorted by
    nothing but the walk. Links (to files or folders), FIFOs, sockets and devices are skipped; nothing is followed.
    Each file is closed when the iteration moves on. A missing root/relative yields nothing. A hard link the tree's
    owner does not own is skipped too (_planted_hard_link), and so is a file whose name `skip` answers True for."""
    try:
        top = open_dir_nofollow(root, relative)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        owner = os.fstat(top).st_uid
        for rel, name, parent, entry in _walk(top):
            if not entry.is_file(follow_symlinks=False) or (skip is not None and skip(name)):
                continue
            try:
                fd, st = _open_regular(name, parent)
            except OSError:  # swapped for a link or a special file since the listing
                continue
            if _planted_hard_link(st, owner):
                os.close(fd)
                continue
            with os.fdopen(fd, "rb") as f:
                yield rel, f, st
    finally:
        os.close(top)


def copy_out(root: str | os.PathLike[str], relative: str | os.PathLike[str], dest: Path, *,
             keep_links: bool = False, skip: Callable[[str], bool] | None = None) -> int:
    """Copy the job-owned tree root/relative into `dest` (a folder of ours, created if missing); returns the count
    of regular files copied. Nothing is followed: links are skipped (or with `keep_links` recreated as links, their
    target text untouched), FIFOs, sockets and devices are skipped, and so is a hard link the tree's owner does not
    own (_planted_hard_link), and a regular file whose name `skip` answers True for. A later file replaces an
    existing one."""
    count = 0
    try:
        top = open_dir_nofollow(root, relative)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    dest.mkdir(parents=True, exist_ok=True)
    try:
        owner = os.fstat(top).st_uid
        for rel, name, parent, entry in _walk(top):
            target = dest / rel
            if entry.is_symlink():
                if keep_links:
                    link = os.readlink(name, dir_fd=parent)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if target.is_symlink() or target.is_file():
                        target.unlink()
                    os.symlink(link, target)
                continue
            if entry.is_dir(follow_symlinks=False):
                target.mkdir(parents=True, exist_ok=True)
                continue
            if not entry.is_file(follow_symlinks=False) or (skip is not None and skip(name)):
                continue
            try:
                fd, st = _open_regular(name, parent)
            except OSError:
                continue
            if _planted_hard_link(st, owner):
                os.close(fd)
                continue
            with os.fdopen(fd, "rb") as src:
                _copy_file(src, st, target, Path(root, relative, rel))
            count += 1
    finally:
        os.close(top)
    return count


def _copy_file(src: BinaryIO, st: os.stat_result, target: Path, shown: Path) -> None:
    """`src` (shown as `shown` in a read error) copied to `target`. write_stream_at: a temp file renamed over the
    target when whole (a link there is replaced, not followed), so a full disk or a stop mid-copy keeps the file it
    replaces (the last good checkpoint), never a truncated one."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        parent = os.open(target.parent, _DIR_FLAGS)
        try:
            write_stream_at(parent, target.name, _chunks(src, shown))
            # the mode exactly (not through the umask) and the source's times, on the file now in place: by descriptor
            fd = os.open(target.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            try:
                os.chmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(fd)
        finally:
            os.close(parent)
    except OSError as exc:
        _naming(exc, target)
        raise


def sweep_stale_temps(root: str | os.PathLike[str], relative: str | os.PathLike[str] = ".") -> int:
    """Remove the temp files killed writers left below root/relative (write_temps.is_stale: this machine's, their
    process gone): regular files only, each unlinked through its folder's descriptor, so a link of such a name is
    left as it is and nothing is followed; a live writer's temp file is never touched. Returns the count."""
    try:
        top = open_dir_nofollow(root, relative)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    count = 0
    try:
        for _rel, name, parent, entry in _walk(top):
            if entry.is_file(follow_symlinks=False) and is_stale(name):
                try:
                    os.unlink(name, dir_fd=parent)  # swapped for a link since: the link goes, never its target
                except OSError:
                    continue  # gone, or swapped for a folder since the listing
                count += 1
    finally:
        os.close(top)
    return count


def host_anchor(host_root: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(trusted root, relative) of a simulated host's /opt/ml at <job>/hosts/<host>/opt/ml: the job owns
    hosts/<host> and may replace anything inside it, but not hosts/<host> itself (hosts/ is ours). Any other
    layout: the folder itself is the trusted root."""
    path = Path(host_root)
    if path.parts[-2:] == ("opt", "ml"):
        return path.parent.parent, Path("opt", "ml")
    return path, Path(".")


def split_host_path(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(trusted root, relative) of a file in a simulated host's folder .../hosts/<host>/opt/ml/...: relative from
    the folder above opt/ml (host_anchor); any other path: (its folder, its name), so at least its last component
    is not followed."""
    parts = Path(path).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i:i + 2] == ("opt", "ml"):
            return Path(*parts[:i]), Path(*parts[i:])
    p = Path(path)
    return p.parent, Path(p.name)


def read_host_file(path: str | os.PathLike[str], limit: int = HOST_FILE_LIMIT) -> bytes:
    """read_bytes_nofollow of a file a job's code may have replaced (its host's files, its logs): see
    split_host_path for the part trusted. More than `limit` bytes: OSError."""
    return read_bytes_nofollow(*split_host_path(path), limit=limit)


def read_host_tail(path: str | os.PathLike[str], limit: int) -> bytes:
    """The last `limit` bytes of a file a job's code may have replaced or filled (a log): see read_host_file."""
    return read_tail_nofollow(*split_host_path(path), limit)
