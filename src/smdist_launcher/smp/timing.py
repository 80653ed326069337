"""A timing context manager that SMP scripts wrap model creation and FSDP construction in."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from .logger import get_logger


@contextlib.contextmanager
def timeit(enabled: bool = True, name: str = "", rank: int | None = 0) -> Iterator[None]:
    """Log how long the block took (on rank 0 when ``rank`` is given, always when it is None)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if enabled and (rank is None or rank == 0):
            get_logger().info("%s took %.3f s", name or "block", time.perf_counter() - start)
