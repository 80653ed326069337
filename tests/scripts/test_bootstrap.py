"""scripts/bootstrap.sh waits for another apt/dpkg instead of failing, and says what it does step by step."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = Path("/var/lib/dpkg/lock-frontend")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None or not LOCK.exists(),
    reason="needs root and apt (as on CI)",
)


def test_bootstrap_waits_for_the_dpkg_lock_held_by_another_process() -> None:
    # This process plays the other apt: it holds the same fcntl lock apt-get takes first.
    fd = os.open(LOCK, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        env = dict(os.environ, SMDIST_BOOTSTRAP_APT="always")
        proc = subprocess.Popen(["bash", "scripts/bootstrap.sh"], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        first = proc.stdout.readline()
        # the first thing it prints says it waits, and for whom; the lock is released only after that line
        assert "another apt/dpkg process holds the package lock; waiting" in first, first
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
    rest = proc.stdout.read()
    assert proc.wait(timeout=900) == 0, first + rest
    lines = (first + rest).splitlines()
    assert any("package lock free" in line for line in lines), rest
    assert any(line.startswith("[bootstrap] apt: installing openmpi-bin") for line in lines), rest
    # every line is a progress line; the last one says it is ready and how to call the commands
    assert all(line.startswith("[bootstrap] ") for line in lines), rest
    assert ".venv/bin/smdist" in lines[-1]
