"""``torch.sagemaker.checkpoint.utils``: keep the newest N checkpoint folders of a run."""
from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

log = logging.getLogger("smdist_launcher.smp")


def _last_int(name: str) -> int:
    found = re.findall(r"\d+", name)
    return int(found[-1]) if found else -1


def _first_int(name: str) -> int:
    found = re.findall(r"\d+", name)
    return int(found[0]) if found else -1


# Sort keys for limit_num_subdirs: folders named like "gpt-120steps" sort by their (last) number.
SORT_BY_LAST_INT: Callable[[str], int] = _last_int
SORT_BY_FIRST_INT: Callable[[str], int] = _first_int


def list_subdirs(root: str | os.PathLike, regex: str | None = None,
                 sort_fn: Callable[[str], SupportsRichComparison] | None = SORT_BY_LAST_INT) -> list[str]:
    """Sub-folder names of ``root`` matching ``regex``, oldest first by ``sort_fn``."""
    if not os.path.isdir(root):
        return []
    names = [n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n))
             and (regex is None or re.match(regex, n))]
    return sorted(names, key=sort_fn) if sort_fn is not None else sorted(names)


def limit_num_subdirs(root_dir: str | os.PathLike, num_kept: int,
                      sort_fn: Callable[[str], SupportsRichComparison] | None = SORT_BY_LAST_INT,
                      regex: str | None = None, log: bool = True, remove: bool | None = None) -> list[str]:
    """Delete all but the newest ``num_kept`` matching sub-folders of ``root_dir``; returns the removed names.

    Only the calling rank acts: scripts pass ``log=dist.get_rank() == 0`` so one rank removes (``remove``
    defaults to ``log``, as in SMP, where one flag chooses the acting rank). ``num_kept <= 0`` keeps everything.
    """
    act = log if remove is None else remove
    if num_kept <= 0 or not act:
        return []
    names = list_subdirs(root_dir, regex, sort_fn)
    doomed = names[:-num_kept] if len(names) > num_kept else []
    for name in doomed:
        if log:
            _log_removal(os.path.join(root_dir, name))
        shutil.rmtree(os.path.join(root_dir, name), ignore_errors=True)
    return doomed


def _log_removal(path: str) -> None:
    log.info("smp: removing old checkpoint %s", path)
