"""The interpreter behind a shim, moved to a folder whose name a shell would expand or split (a space, a `$`,
quotes): the container shims must take its path literally."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest


def use_odd_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.executable becomes a wrapper of this interpreter in such a folder (for this test)."""
    odd = tmp_path / "py $HOME 'x\""
    odd.mkdir()
    python = odd / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
