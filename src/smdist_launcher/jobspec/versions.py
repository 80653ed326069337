"""Semantic version comparison without `packaging` (not guaranteed installed): "2.2" ≥ "1.13" is true."""
from __future__ import annotations

import re

_VERSION = re.compile(r"\d+(\.\d+){0,3}")  # fullmatched: no trailing newline


def is_version(text: str) -> bool:
    return bool(_VERSION.fullmatch(text))


def parse(text: str) -> tuple[int, ...]:
    """'2.2' → (2, 2); trailing zeros dropped so '2.0.0' == '2'. ValueError if not dotted digits."""
    if not is_version(text):
        raise ValueError(f"not a version: {text!r}")
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)
