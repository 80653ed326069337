"""Run a command where DNS cannot be reached (a private mount namespace whose /etc/resolv.conf names a nameserver
nothing listens on): a lookup that falls through to DNS fails at once with EAI_AGAIN (-3), as on a machine without
a reachable DNS server, instead of depending on what this machine's resolver answers."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RESOLV_CONF = "nameserver 127.255.0.53\noptions timeout:1 attempts:1\n"


def dead_dns_prefix(folder: Path) -> list[str]:
    """argv prefix; skips the test where a mount namespace cannot be made (not root, unshare refused)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (a private /etc/resolv.conf)")
    conf = folder / "dead-resolv.conf"
    conf.write_text(RESOLV_CONF)
    prefix = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(conf)]
    if subprocess.run([*prefix, "true"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("unshare -m / mount --bind refused here")
    return prefix
