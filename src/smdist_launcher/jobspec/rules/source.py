"""The one file-system check: the entry point exists where the launcher will look for it."""
from __future__ import annotations

import os
from collections.abc import Iterator

from ...contract.entry_point import entry_point_type
from ...errors import ErrorItem
from ..error_items import item
from ..strategy import TORCHRUN_LAUNCHED
from .context import RuleContext


def _exists(ctx: RuleContext, entry: str) -> Iterator[ErrorItem]:
    args = ctx.args
    if args.source_dir is not None and not args.source_dir.startswith("s3://"):
        root = args.source_dir_path or ""
        if not os.path.isdir(root):
            yield item("source_dir", f"directory {root!r} does not exist", args.source_dir)
            return
        if os.path.isabs(entry) or os.path.normpath(entry).split(os.sep)[0] == "..":
            yield item("entry_point", f"must be a path inside source_dir ({args.source_dir}), relative to it", entry)
            return
        if not os.path.isfile(args.entry_point_path or ""):
            yield item("entry_point", f'no file named "{entry}" was found in directory "{root}"', entry)
    elif args.source_dir is None and not os.path.isfile(args.entry_point_path or ""):
        yield item("entry_point",
                   f'no file named "{entry}" was found (looked in {args.base_dir}); give the script path '
                   "or set source_dir", entry)


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    entry = ctx.args.entry_point
    if entry is None:
        if "entry_point" not in ctx.broken:
            yield item("entry_point", "is required: the training script to run, e.g. train.py")
        return
    if not entry.strip():
        yield item("entry_point", "must not be empty; give the training script, e.g. train.py", entry)
        return
    if "\x00" in entry or (ctx.args.source_dir and "\x00" in ctx.args.source_dir):
        yield item("entry_point", "must not contain NUL characters", entry)
        return
    if ctx.launch.strategy in TORCHRUN_LAUNCHED and not entry_point_type(entry).is_python:
        yield item("entry_point", f"{ctx.launch.strategy} runs Python scripts only (*.py)", entry)
    if ctx.check_source:
        try:
            yield from _exists(ctx, entry)
        except (OSError, ValueError) as exc:
            yield item("entry_point", f"cannot be checked: {exc}", entry)
