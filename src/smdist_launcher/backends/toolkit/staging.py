"""Fill each simulated host's input/data/<channel> and code/ before the hosts start.

- Local channels (file:// or a path) are SYMLINKED, never copied: the same as SageMaker local
  mode's bind mounts, O(1) for any size, and the job folder stays small. FullyReplicated links
  the whole folder; ShardedByS3Key links each host its share of the files.
- s3:// channels are downloaded once into <job>/staging/<channel> and linked into every host
  (ShardedByS3Key: each host downloads only its share, straight into its channel folder).
- Code: source_dir is COPIED into every host's code/ (small, and a host's script may write
  next to itself, like in a container), skipping caches, VCS folders and the jobs folder.

A host's folder belongs to its job (serve --run-as hands it over), which may have planted links in it on an earlier
attempt. So nothing is written into it by path: every copy or download is built in a scratch folder of ours beside
the hosts (same file system), then renamed into its place, and every link is made, relative to the parent folder
opened without following any link (contract/no_follow.py); whatever the job left in that place is removed first
(by descriptor: a link is unlinked, never followed)."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from ...contract import MLPaths
from ...contract.no_follow import host_anchor, open_dir_nofollow, remove_at
from ...plan.model import Channel, LaunchPlan
from ..api import Code, Submission
from ..storage import s3 as s3io
from ..storage.locations import Location, parse_location
from ..toolkit.source_tree import check_source_links

_CODE_IGNORE = ("__pycache__", "*.pyc", ".git", ".hg", ".svn", ".smdist", ".venv", ".mypy_cache", ".pytest_cache")


# A container command may change its channels (SDK v3's sm_train.sh chmods a file of its sm_drivers channel), as it
# may on SageMaker, where each host has its own copy: such jobs get copies, not links to one shared (read-only) folder.
_OWN_COPIES_LAUNCHERS = ("container_command",)


def stage_channels(plan: LaunchPlan, hosts: dict[str, MLPaths], staging_dir: Path) -> None:
    names = list(hosts)
    copies = plan.launcher in _OWN_COPIES_LAUNCHERS
    for name, channel in plan.channels.items():
        loc = parse_location(channel.uri, field=f"inputs.{name}")
        dests = {h: _Slot(hosts[h], PurePosixPath("input", "data", name)) for h in names}
        if loc.is_s3:
            _stage_s3(name, channel, loc, dests, staging_dir, copies)
        else:
            _stage_local(name, channel, loc, dests, copies)


class _Slot:
    """A place in a host's folder (a path below its /opt/ml), written only through its parent folder's descriptor,
    opened without following links."""

    def __init__(self, paths: MLPaths, relative: PurePosixPath) -> None:
        self.root, ml = host_anchor(paths.root)
        self.relative = PurePosixPath(ml.as_posix(), relative)
        self.name = self.relative.name

    def clear(self, parent: int) -> None:
        """Remove what is at the slot: a folder with its contents (by descriptor), a link or a file."""
        remove_at(parent, self.name)

    def _parent(self) -> int:
        self.root.mkdir(parents=True, exist_ok=True)  # ours: the folder the job cannot replace
        return open_dir_nofollow(self.root, self.relative.parent, create=True)

    def put_tree(self, built: Path) -> None:
        """Move `built` (a folder of ours on the same file system) into the slot."""
        parent = self._parent()
        try:
            self.clear(parent)
            os.rename(built, self.name, dst_dir_fd=parent)
        finally:
            os.close(parent)

    def put_link(self, target: Path) -> None:
        parent = self._parent()
        try:
            self.clear(parent)
            os.symlink(target, self.name, dir_fd=parent)
        finally:
            os.close(parent)

    def scratch(self) -> Path:
        """A fresh folder of ours beside the hosts' folders (<job>/hosts is ours; the same file system), for building
        what put_tree moves in."""
        self.root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".smdist-staging-", dir=self.root.parent))


def _build_and_put(slot: _Slot, build: Callable[[Path], object]) -> None:
    """build(folder) into a scratch folder of ours, then moved into `slot`; the scratch folder never stays."""
    scratch = slot.scratch()
    try:
        built = scratch / "tree"
        build(built)
        slot.put_tree(built)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _link_or_copy(dest: _Slot, src: Path, copies: bool) -> None:
    """`dest` (a channel folder) as `src`: a link to it, or with `copies` a copy of its own."""
    if copies:
        _build_and_put(dest, lambda built: shutil.copytree(src, built, symlinks=False))
    else:
        dest.put_link(src)


def _shard(items: list, index: int, count: int) -> list:
    """ShardedByS3Key: host i gets every count-th item, starting at i (sorted by key)."""
    return items[index::count]


def _stage_local(name: str, channel: Channel, loc: Location, dests: dict[str, _Slot], copies: bool = False) -> None:
    assert loc.path is not None
    src = loc.path
    if not src.exists():
        raise FileNotFoundError(f"inputs.{name}: {channel.uri} does not exist; create it or fix the path")
    if src.is_file():
        for dest in dests.values():
            _build_and_put(dest, lambda built: _make_links(built, {src.name: src}))
        return
    if channel.distribution == "FullyReplicated":
        for dest in dests.values():
            _link_or_copy(dest, src, copies)
        return
    files = sorted(p for p in src.rglob("*") if p.is_file())
    for i, dest in enumerate(dests.values()):
        share = {f.relative_to(src).as_posix(): f for f in _shard(files, i, len(dests))}
        _build_and_put(dest, partial(_make_links, links=share))


def _make_links(folder: Path, links: dict[str, Path]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rel, target in links.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).symlink_to(target)


def _stage_s3(name: str, channel: Channel, loc: Location, dests: dict[str, _Slot], staging_dir: Path,
              copies: bool = False) -> None:
    s3 = s3io.client()
    objects = s3io.list_objects(s3, loc)
    if not objects:
        raise FileNotFoundError(f"inputs.{name}: no objects under {channel.uri}; upload the data or fix the URI")
    if channel.distribution == "ShardedByS3Key":
        for i, dest in enumerate(dests.values()):
            share = _shard(objects, i, len(dests))
            _build_and_put(dest, partial(_download, s3, loc, share))
        return
    shared = staging_dir / name
    shared.mkdir(parents=True, exist_ok=True)
    s3io.download(s3, loc, objects, shared)
    for dest in dests.values():
        _link_or_copy(dest, shared, copies)


def _download(s3: Any, loc: Location, objects: list[tuple[str, PurePosixPath]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    s3io.download(s3, loc, objects, folder)


def local_code_source(plan: LaunchPlan) -> Path | None:
    """The local folder (or lone entry-point file) of a bare plan, relative paths read from the working directory;
    None for an s3:// source_dir. (A submission built by the estimator knows its job file's folder instead.)"""
    if plan.source_dir is not None and plan.source_dir.startswith("s3://"):
        return None
    if plan.source_dir is not None:
        return parse_location(plan.source_dir, field="source_dir").path
    return parse_location(plan.entry_point, field="entry_point").path


def submission_of(job: Submission | LaunchPlan) -> Submission:
    """A submission as it is, or one for a bare plan (code from the working directory, no model channel)."""
    if isinstance(job, Submission):
        return job
    return Submission(plan=job, code=Code(source=local_code_source(job)))


def with_model_channel(plan: LaunchPlan, model: tuple[str, Channel] | None) -> LaunchPlan:
    """SageMaker hands model_uri to the job as one more File channel (`model`, or model_channel_name): the same here,
    so it is staged like any input and the script finds it in SM_CHANNEL_MODEL."""
    if model is None:
        return plan
    name, channel = model
    if name in plan.channels:
        raise ValueError(f"inputs.{name}: model_uri is given to the job as channel {name!r} too; rename that input "
                         "or set model_channel_name")
    return plan.model_copy(update={"channels": {**plan.channels, name: channel}})


@dataclass(frozen=True)
class LocalCode:
    """The code a local-type job copies into each host: source_dir (or the lone entry point; None for an s3://
    archive the runtime unpacks) and the dependencies, each under its base name as on SageMaker."""

    source: Path | None
    dependencies: tuple[Path, ...] = ()


def prepare_local_run(job: Submission | LaunchPlan) -> tuple[LaunchPlan, LocalCode]:
    """What every backend that stages hosts from a job folder does before the folder exists: check the code against
    the same link rule as the SageMaker archive, and give model_uri to the job as its channel."""
    submission = submission_of(job)
    code = LocalCode(submission.code.source, submission.code.dependencies)
    follow = submission.code.follow_symlinks
    check_source_links(code.source, follow_symlinks=follow)
    for dependency in code.dependencies:
        if not dependency.exists():
            raise FileNotFoundError(f"dependencies: {dependency} does not exist")
        check_source_links(dependency, follow_symlinks=follow, what="dependencies")
    plan = with_model_channel(submission.plan, submission.model_channel)
    return with_checkpoint_folder(plan, submission.code.base_dir), code


def with_checkpoint_folder(plan: LaunchPlan, base_dir: str | None = None) -> LaunchPlan:
    """A relative checkpoint folder (file://ckpt or ckpt) made absolute against the job's base folder (a job file's
    folder, else where it was built), like model_uri and inputs: restoring happens here, but saving may happen
    elsewhere (Slurm's finisher runs in the job folder), and both must use the same folder."""
    uri = plan.checkpoint_s3_uri
    if not uri or uri.startswith("s3://"):
        return plan
    if uri.startswith("file://"):  # file://ckpt is the relative path ckpt, as parse_location reads it
        parsed = urlparse(uri)
        raw = unquote(("" if parsed.netloc == "localhost" else parsed.netloc) + parsed.path)
    else:
        raw = os.path.expanduser(uri)
    base = base_dir or os.getcwd()
    return plan.model_copy(update={"checkpoint_s3_uri": Path(base, raw).resolve().as_uri()})  # Path(base, /abs) = /abs


def stage_code(code: LocalCode | Path | None, hosts: dict[str, MLPaths], keep_out: Path) -> None:
    """Copy the code into each host's code/, then each dependency under its base name. No source (s3://) is left
    to the runtime, which unpacks sagemaker_submit_directory itself. Built in a scratch folder of ours and moved
    into each host's folder (a fresh code/ each attempt, like the source folder was)."""
    if not isinstance(code, LocalCode):
        code = LocalCode(code)
    if code.source is None and not code.dependencies:
        return
    for paths in hosts.values():
        _build_and_put(_Slot(paths, PurePosixPath("code")), lambda built: _build_code(code, built, keep_out))


def _build_code(code: LocalCode, built: Path, keep_out: Path) -> None:
    _copy_source(code.source, built, keep_out)
    built.mkdir(parents=True, exist_ok=True)
    for dependency in code.dependencies:
        target = built / dependency.name
        if dependency.is_dir():
            shutil.copytree(dependency, target, ignore=shutil.ignore_patterns(*_CODE_IGNORE), symlinks=True,
                            dirs_exist_ok=True)
        else:
            shutil.copy2(dependency, target)


def _copy_source(source: Path | None, built: Path, keep_out: Path) -> None:
    if source is None:
        return
    if source.is_file():
        built.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, built / source.name)
        return
    if not source.is_dir():
        raise FileNotFoundError(f"source_dir: {source} does not exist")
    base_ignore = shutil.ignore_patterns(*_CODE_IGNORE)
    keep_out = keep_out.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(base_ignore(folder, names))
        # A source_dir that contains the jobs folder must not copy jobs into jobs.
        skipped.update(n for n in names if Path(folder, n).resolve() == keep_out)
        return skipped

    shutil.copytree(source, built, ignore=ignore, symlinks=True)
