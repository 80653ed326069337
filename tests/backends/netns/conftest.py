"""The netns backend needs root, iproute2, nsenter and openssh-server (scripts/bootstrap.sh installs the last)."""
from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mnist"


@pytest.fixture(scope="session")
def netns_ready() -> None:
    from smdist_launcher.backends.netns.job import NetnsUnavailable, check_available

    try:
        check_available()
    except NetnsUnavailable as e:
        pytest.skip(str(e))


