"""Pinned plan files for CI: render a plan, compare it with the pinned file, show a unified diff, rewrite it.

Used by ``smdist plan --check/--write`` and by the ``plan_snapshot`` pytest fixture. Rendering is the plan's own
deterministic JSON/YAML with secrets redacted; the format follows the file's extension (.json, .yaml/.yml).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pragma: no cover
    from .model import LaunchPlan

PlanFormat = Literal["json", "yaml"]
_EXTENSIONS: dict[str, PlanFormat] = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def format_for(path: str | os.PathLike[str], explicit: str | None = None) -> PlanFormat:
    """The explicit format if given, else the one the file name asks for (JSON when the extension says nothing)."""
    if explicit == "json":
        return "json"
    if explicit == "yaml":
        return "yaml"
    return _EXTENSIONS.get(Path(path).suffix.lower(), "json")


def render(plan: LaunchPlan, fmt: PlanFormat) -> str:
    return plan.to_yaml() if fmt == "yaml" else plan.to_json()


@dataclass(frozen=True)
class SnapshotCheck:
    path: Path
    missing: bool
    diff: str  # "" when the pinned file matches

    @property
    def matches(self) -> bool:
        return not self.missing and not self.diff

    def message(self) -> str:
        if self.missing:
            return (f"{self.path}: no pinned plan yet; create it with --write (smdist) "
                    "or --plan-snapshot-update (pytest)")
        if self.diff:
            return (f"{self.path}: the plan changed (- pinned, + now); if intended, update it with --write / "
                    f"--plan-snapshot-update\n{self.diff}")
        return f"{self.path}: plan matches"


def unified_diff(pinned: str, current: str, path: str | os.PathLike[str]) -> str:
    lines = difflib.unified_diff(pinned.splitlines(keepends=True), current.splitlines(keepends=True),
                                 fromfile=f"{path} (pinned)", tofile=f"{path} (current)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def check(rendered: str, path: str | os.PathLike[str]) -> SnapshotCheck:
    target = Path(path)
    try:
        pinned = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return SnapshotCheck(target, missing=True, diff="")
    diff = "" if pinned == rendered else unified_diff(pinned, rendered, target)
    return SnapshotCheck(target, missing=False, diff=diff)


def write(rendered: str, path: str | os.PathLike[str]) -> bool:
    """Write the pinned file if its content differs; True when something changed. Atomic (temp file + rename)."""
    target = Path(path)
    if target.is_file() and target.read_text(encoding="utf-8") == rendered:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.write_text(rendered, encoding="utf-8")
    os.replace(tmp, target)
    return True
