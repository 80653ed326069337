from __future__ import annotations

import pytest

from smdist_launcher.jobspec import versions


@pytest.mark.parametrize(("version", "minimum", "expected"), [
    ("2.2", "1.13", True), ("1.13.1", "1.13", True), ("1.12.1", "1.13", False), ("2.0.0", "2", True),
    ("1.9", "1.12", False), ("10.0", "9.9", True), ("2", "2.0.1", False),
])
def test_at_least(version: str, minimum: str, expected: bool) -> None:
    assert versions.at_least(version, minimum) is expected


@pytest.mark.parametrize("text", ["2.x", "", "v2.1", "2.1-rc1", "1.2.3.4.5"])
def test_rejects_non_versions(text: str) -> None:
    assert not versions.is_version(text)
    with pytest.raises(ValueError):
        versions.parse(text)
