"""``torch.sagemaker.logger``: the library's logger (``get_logger``), one stream handler, rank-tagged lines."""
from __future__ import annotations

import logging
import os

_NAME = "smdist_launcher.smp"


def get_logger(name: str | None = None, level: int | str | None = None) -> logging.Logger:
    """The SMP logger (or a child of it); configured once with a handler that prints the rank."""
    logger = logging.getLogger(_NAME if not name else f"{_NAME}.{name}")
    root = logging.getLogger(_NAME)
    if not getattr(root, "_smp_configured", False):
        handler = logging.StreamHandler()
        rank = os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
        handler.setFormatter(logging.Formatter(f"[%(asctime)s] [smp r{rank}] %(levelname)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(os.environ.get("SMP_LOG_LEVEL", "INFO").upper())
        root.propagate = False
        root._smp_configured = True  # type: ignore[attr-defined]
    if level is not None:
        logger.setLevel(level)
    return logger
