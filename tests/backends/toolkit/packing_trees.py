"""Shared setup of the packing stop tests: a model folder of random weights, and a progress callback that stops the
packing the way the launcher's SIGTERM handler does."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit import packing
from smdist_launcher.backends.toolkit.supervisor import Interrupted


def random_model(root: Path, file_bytes: int) -> Path:
    """root/model with w0.bin..w2.bin of random (incompressible) bytes."""
    src = root / "model"
    src.mkdir()
    for i in range(3):
        (src / f"w{i}.bin").write_bytes(os.urandom(file_bytes))
    return src


def stop_at_second_report(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Callable[[str], None]]:
    """Progress reported at once and on every chunk; the callback records each line and raises Interrupted at the
    second. Returns (the lines said, the callback)."""
    monkeypatch.setattr(packing, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(packing, "PROGRESS_EVERY_S", 0.0)
    said: list[str] = []

    def report(line: str) -> None:
        said.append(line)
        if len(said) == 2:
            raise Interrupted()  # what the launcher's SIGTERM handler raises

    return said, report
