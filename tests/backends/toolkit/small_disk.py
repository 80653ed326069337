"""Python code run with a tiny tmpfs of its own (a private mount namespace: nothing leaks, the real disk is never
filled), for the full-disk tests. The code gets `disk` (the tmpfs folder), `fill()` (writes until ENOSPC) and
`small_disk_at(folder)` (one more tmpfs, where the code needs its own: a job's hosts/ beside logs that are not full),
and prints its findings as the last line of stdout, in JSON; tests/ is on its sys.path (backends.plans imports)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PRELUDE = '''
import errno, json, os, sys
from pathlib import Path
disk = Path(sys.argv[1])
sys.path.insert(0, TESTS)  # the tests' own helpers (backends.plans)

def fill():
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)

def small_disk_at(folder, size="256k"):
    """Another tiny tmpfs, at `folder` (created), in the same private mount namespace: a job's hosts/ alone."""
    import subprocess
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
'''


def on_small_disk(tmp_path: Path, code: str, size: str = "256k") -> Any:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (a private tmpfs)")
    disk = tmp_path / "small-disk"
    disk.mkdir()
    script = tmp_path / "on_small_disk.py"
    script.write_text(f"TESTS = {str(Path(__file__).resolve().parents[2])!r}\n" + PRELUDE + code)
    proc = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o "size=$1" tmpfs "$0" && exec "$2" "$3" "$0"',
                           str(disk), size, sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "mount" in proc.stderr and "Traceback" not in proc.stderr:
        pytest.skip(f"unshare -m / mount -t tmpfs refused here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])
