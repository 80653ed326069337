"""Walking the user's source_dir (and dependency folders) for the code archive and local staging: one rule for
symbolic links, so a job packs the same files locally and for SageMaker.

A link whose target stays inside the folder is kept as a link. A link that leaves it (``data -> /etc/ssl``,
``../secrets``) is refused with its path, unless the user opts in with ``follow_symlinks=True``: then its target's
content is packed in its place. (The SageMaker SDK's create_tar_file opens its tarfile with dereference=True: it
follows every link silently, so a link to /etc/ssl uploads /etc/ssl. follow_symlinks=True is that behaviour, asked
for.)"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

IGNORED_NAMES = frozenset({".git", "__pycache__", ".ipynb_checkpoints"})


class SymlinkError(ValueError):
    """A symbolic link in source_dir points outside it (or nowhere) and the user did not opt in."""


@dataclass(frozen=True)
class SourceEntry:
    path: Path               # on disk
    name: str                # in the archive (posix, relative)
    link: str | None = None  # a kept link: its relative target text


def _inside(root: str, target: str) -> bool:
    return os.path.commonpath([root, target]) == root


def _outside_error(path: Path, root: Path, target: str, what: str) -> SymlinkError:
    return SymlinkError(
        f"{what}: {path} is a symbolic link to {target}, outside {root}; it would not exist in the job. "
        f"Copy what it points at into {root}, remove the link, or pass follow_symlinks=True to pack its content")


def walk_source(root: Path, arc_root: str = "", *, follow_symlinks: bool = False,
                what: str = "source_dir") -> Iterator[SourceEntry]:
    """Files and kept links below root, sorted, version-control and cache folders left out."""
    real_root = os.path.realpath(root)
    seen: set[str] = set()

    def arc(rel: str) -> str:
        return f"{arc_root}/{rel}" if arc_root else rel

    def walk(folder: Path, rel: str) -> Iterator[SourceEntry]:
        real = os.path.realpath(folder)
        if real in seen:
            raise SymlinkError(f"{what}: symbolic link loop at {folder}")
        seen.add(real)
        folders: list[tuple[Path, str]] = []
        for name in sorted(os.listdir(folder)):
            path = folder / name
            child = f"{rel}/{name}" if rel else name
            if path.is_dir() and not path.is_symlink() and name in IGNORED_NAMES:
                continue
            if path.is_symlink():
                target = os.path.realpath(path)
                if not os.path.exists(target):
                    raise FileNotFoundError(f"{what}: {path} is a broken symbolic link (to {os.readlink(path)}); "
                                            "remove it or fix its target")
                if _inside(real_root, target):
                    # kept as a link, relative so it resolves wherever the code is unpacked
                    here = os.path.dirname(os.path.join(real_root, child))
                    yield SourceEntry(path, arc(child), os.path.relpath(target, here))
                    continue
                if not follow_symlinks:
                    raise _outside_error(path, root, target, what)
            if path.is_dir():
                folders.append((path, child))  # a folder's files first, then its subfolders
            elif path.is_file():
                yield SourceEntry(path, arc(child))
            # sockets, FIFOs, devices: not code, left out
        for path, child in folders:
            yield from walk(path, child)

    yield from walk(root, "")


def check_source_links(root: Path | None, *, follow_symlinks: bool = False, what: str = "source_dir") -> None:
    """Raise SymlinkError for the first link leaving root (local staging copies links as links)."""
    if root is not None and root.is_dir():
        for _ in walk_source(root, follow_symlinks=follow_symlinks, what=what):
            pass
