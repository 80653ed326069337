"""A full disk (or a quota): the failure a job's end answers by giving space back (a .partial it packed) or by
writing in blocks a file already holds (the job's record), so that the job's own files are kept and its end is told."""
from __future__ import annotations

import errno

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_full_disk(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS
