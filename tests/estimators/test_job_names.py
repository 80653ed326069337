from __future__ import annotations

import re

from smdist_launcher.estimators.job_names import name_from_base, timestamp

NOW = 1714566896.789  # 2024-05-01 12:34:56.789 UTC


def test_timestamp_format() -> None:
    assert timestamp(NOW) == "2024-05-01-12-34-56-789"


def test_name_from_base() -> None:
    assert name_from_base("pytorch-training", NOW) == "pytorch-training-2024-05-01-12-34-56-789"


def test_long_base_is_trimmed_to_63() -> None:
    name = name_from_base("x" * 100, NOW)
    assert len(name) == 63 and name.endswith("-2024-05-01-12-34-56-789")
    assert re.match(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", name)
