"""One warning per process for API arguments that are accepted but change nothing here (never silent, never noisy)."""
from __future__ import annotations

import warnings

_said: set[str] = set()


def warn_once(key: str, message: str) -> None:
    if key in _said:
        return
    _said.add(key)
    warnings.warn(f"smdistributed.modelparallel: {message}", UserWarning, stacklevel=3)
