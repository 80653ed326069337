"""Room for a host's failure record, taken before the script runs.

A script that fills its disk leaves no room for output/failure.json: a host that cannot explain itself looks like one
whose runtime was killed (host_lost, retried: the same full disk again, paid for nothing). So the runtime takes
RESERVE_BYTES at start, written out (allocated blocks, not a sparse file), and when failure.json cannot be written for
a full disk, writes the record over those blocks in place (an overwrite needs no new block on an overwrite-in-place
file system: ext4, xfs, tmpfs; a copy-on-write one, btrfs or zfs, may still refuse it) and renames the file to
failure.json. The spaces after the record are JSON whitespace: the file parses whole, whatever the record's length.

The output folder is the job's: it may plant a link, a FIFO or a hard link at the reserve's name. The reserve is
opened below the output folder's parent without following a link (contract/no_follow.py), non-blocking, and written
only when it is a regular file of one link and of its full size; the rename replaces a link at failure.json.

Runtime-safe: stdlib only."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..contract.no_follow import open_dir_nofollow

RESERVE_NAME = ".smdist-failure.reserve"
RESERVE_BYTES = 16 << 10
_LINE_CHARS = 400  # of each traceback line and argument kept in a record that must fit the reserve


def _anchor(output_dir: Path) -> tuple[Path, str]:
    """(trusted root, relative output folder): the runtime's /opt/ml is trusted, its output/ is the job's."""
    return output_dir.parent, output_dir.name


def take(output_dir: Path) -> bool:
    """Write the reserve (a fresh file: whatever the job left at its name is replaced). False when it could not be
    written (the disk is full already): the failure record then needs the space of its own."""
    root, folder = _anchor(output_dir)
    try:
        parent = open_dir_nofollow(root, folder, create=True)
    except OSError:
        return False
    try:
        try:
            os.unlink(RESERVE_NAME, dir_fd=parent)  # a link is removed, never followed
        except FileNotFoundError:
            pass
        fd = os.open(RESERVE_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=parent)
        try:
            data = memoryview(b" " * RESERVE_BYTES)  # written, not ftruncated: a sparse file reserves nothing
            while data:  # a nearly full disk takes what fits and says so; the next write fails with ENOSPC
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
        return True
    except OSError:
        try:
            os.unlink(RESERVE_NAME, dir_fd=parent)  # half a reserve would only hold a truncated record
        except OSError:
            pass
        return False
    finally:
        os.close(parent)


def release(output_dir: Path) -> None:
    """The reserve is not needed (failure.json or success written): its blocks go back."""
    root, folder = _anchor(output_dir)
    try:
        parent = open_dir_nofollow(root, folder)
    except OSError:
        return
    try:
        os.unlink(RESERVE_NAME, dir_fd=parent)
    except OSError:
        pass
    finally:
        os.close(parent)


def fitted(record: dict[str, Any], size: int = RESERVE_BYTES) -> bytes:
    """The record as compact JSON of at most `size` bytes: the stacks of ranks still running left out, lines cut, the
    oldest traceback lines dropped first (the exception's line is the last one)."""
    slim = {k: v for k, v in record.items() if k != "still_running"}
    slim["command"] = [str(a)[:_LINE_CHARS] for a in record.get("command") or []]
    lines = [str(line)[:_LINE_CHARS] for line in record.get("traceback") or []]
    while True:
        slim["traceback"] = lines
        data = json.dumps(slim, sort_keys=True, separators=(",", ":")).encode("utf-8")
        if len(data) <= size:
            return data
        if lines:
            lines = lines[1:]
        elif slim["command"]:
            slim["command"] = []
        else:
            raise ValueError(f"a failure record does not fit {size} bytes")


def fill(output_dir: Path, record: dict[str, Any]) -> bool:
    """Write `record` over the reserve and rename it to failure.json; False without a usable reserve."""
    root, folder = _anchor(output_dir)
    try:
        parent = open_dir_nofollow(root, folder)
    except OSError:
        return False
    try:
        # O_NONBLOCK: a FIFO planted at the name fails (ENXIO) rather than waiting for a reader
        fd = os.open(RESERVE_NAME, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size < RESERVE_BYTES:
                return False  # not the reserve we wrote: the job replaced it
            os.pwrite(fd, fitted(record).ljust(RESERVE_BYTES), 0)  # over every byte: the job may have written some
            if st.st_size > RESERVE_BYTES:
                os.ftruncate(fd, RESERVE_BYTES)  # grown by the job: what follows would be no JSON
        finally:
            os.close(fd)
        os.replace(RESERVE_NAME, "failure.json", src_dir_fd=parent, dst_dir_fd=parent)
        return True
    except (OSError, ValueError):
        return False
    finally:
        os.close(parent)

