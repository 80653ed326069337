"""A full disk (or a quota), as an error and as a line of output.

The launcher's end answers one by giving space back (a .partial it packed) or by writing in blocks a file already
holds (the job's record, a host's failure record: container/failure_reserve.py). A script that filled its disk is a
client error, the same on every attempt (SageMaker reports it so): a host that could not even write its failure record
is known by the line its log ends with, never retried as a lost host.

Runtime-safe: stdlib only."""
from __future__ import annotations

import errno
import re
from collections.abc import Iterable

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# What a failed write prints: the C library's words for the two errnos (Python's OSError, torch, shell tools) and their
# symbolic names (NCCL, Node, Java). A word of a message, on purpose: the host left nothing else.
_FULL_DISK_WORDS = re.compile(r"No space left on device|Disk quota exceeded|\bENOSPC\b|\bEDQUOT\b")
LINE_CHARS = 300  # of the line a reason quotes: a job may print a line of any length


def is_full_disk(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS


def full_disk_line(lines: Iterable[str]) -> str | None:
    """The first line that says a write failed for a full disk or a quota (the cause; later ones are what it broke
    next), stripped and cut to LINE_CHARS; None without one."""
    for line in lines:
        if _FULL_DISK_WORDS.search(line):
            text = line.strip()
            return text if len(text) <= LINE_CHARS else f"{text[:LINE_CHARS]}..."
    return None
