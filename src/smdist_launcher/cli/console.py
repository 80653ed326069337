"""Terminal output for the CLI: rich colours only when a terminal is attached (and rich imported only then),
plain text otherwise."""
from __future__ import annotations

import sys
from typing import TextIO


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def show(text: str, *, syntax: str | None = None, stream: TextIO | None = None) -> None:
    """Print ``text``; with a terminal, highlighted as ``syntax`` (yaml, json, diff)."""
    out = stream or sys.stdout
    if syntax and _is_tty(out):
        from rich.console import Console
        from rich.syntax import Syntax

        Console(file=out).print(Syntax(text.rstrip("\n"), syntax, background_color="default", word_wrap=False))
        return
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def problem(line: str, *, warning: bool = False) -> None:
    """One compiler-style line on stderr (``job.yaml: key.path: message``)."""
    err = sys.stderr
    if _is_tty(err):
        from rich.console import Console
        from rich.markup import escape

        style = "yellow" if warning else "red"
        Console(file=err, highlight=False).print(f"[{style}]{escape(line)}[/{style}]")
        return
    err.write(line + "\n")
    err.flush()
