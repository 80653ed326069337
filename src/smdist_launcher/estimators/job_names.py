"""SageMaker's job naming: `<base>-%Y-%m-%d-%H-%M-%S-<ms>` in UTC, the whole name at most 63 characters."""
from __future__ import annotations

import time

MAX_JOB_NAME = 63


def timestamp(now: float | None = None) -> str:
    now = time.time() if now is None else now
    millis = int(now * 1000) % 1000
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now)) + f"-{millis:03d}"


def name_from_base(base: str, now: float | None = None) -> str:
    """base trimmed so that base-timestamp fits 63 characters (sagemaker.utils.name_from_base)."""
    stamp = timestamp(now)
    return f"{base[: MAX_JOB_NAME - len(stamp) - 1]}-{stamp}"


def v3_name_from_base(base: str, now: float | None = None) -> str:
    """SageMaker SDK v3's job names: `<base>-%Y%m%d%H%M%S` in local time (as v3), `_` in base as `-`. v3 cuts the
    whole name at 63 characters, losing the stamp's end; here base is trimmed instead, so the stamp stays whole."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{base.replace('_', '-')[: MAX_JOB_NAME - len(stamp) - 1]}-{stamp}"
