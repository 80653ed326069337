"""The one kept layout of a job's attempts.

    <job>/hosts/<host>/            the running (or final) attempt's host trees: what model.tar.gz and output.tar.gz
                                   are packed from
    <job>/attempts/<n>/<host>/     attempt n's host trees, moved there whole before attempt n+1 is staged

A retry never stages into a tree an earlier attempt used: its files (outputs, failure.json, master_done.json, stack
dumps) cannot leak into the next attempt, the final archives or the report of a job that completed."""
from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from ....contract import MLPaths
from ..jobdir import JobDir

ATTEMPTS_DIR = "attempts"


def attempt_dir(job: JobDir, number: int) -> Path:
    return job.root / ATTEMPTS_DIR / str(number)


def keep_hosts(job: JobDir, number: int, hosts: Iterable[str]) -> dict[str, MLPaths]:
    """Move every host's tree of attempt `number` to attempts/<number>/<host>/; returns where each one is now.
    A host without a tree (its staging never began) is left out."""
    kept: dict[str, MLPaths] = {}
    folder = attempt_dir(job, number)
    for host in hosts:
        tree = job.host_dir(host)
        target = folder / host
        if tree.is_dir() and not tree.is_symlink():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.move(str(tree), str(target))  # a rename: the same file system
        if target.is_dir():
            kept[host] = kept_paths(job, number, host)
    return kept


def kept_paths(job: JobDir, number: int, host: str) -> MLPaths:
    """A kept host's /opt/ml."""
    return MLPaths(attempt_dir(job, number) / host / "opt" / "ml")


def kept_attempts(job: JobDir) -> dict[int, dict[str, MLPaths]]:
    """Every kept attempt (oldest first): its number -> each host's /opt/ml."""
    root = job.root / ATTEMPTS_DIR
    out: dict[int, dict[str, MLPaths]] = {}
    for folder in sorted(root.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1) \
            if root.is_dir() else []:
        if folder.name.isdigit() and folder.is_dir():
            out[int(folder.name)] = {h.name: kept_paths(job, int(folder.name), h.name)
                                     for h in sorted(folder.iterdir()) if h.is_dir()}
    return out


def final_trees(job: JobDir, number: int, hosts: Iterable[str]) -> dict[str, MLPaths]:
    """Where attempt `number`'s host trees are now: kept already (a restart that could not start after it), else the
    live ones."""
    names = list(hosts)
    kept = {h: kept_paths(job, number, h) for h in names if (attempt_dir(job, number) / h).is_dir()}
    return kept if kept else {h: MLPaths(job.host_root(h)) for h in names}
