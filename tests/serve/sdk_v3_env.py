"""The official SageMaker SDK v3 (`sagemaker` 3.x) in a virtual environment of its own, for the tests that run it as
a client of `smdist serve` (it cannot share .venv, which holds the v2 SDK the parity tests use).

Built once with pip from the pinned list next to this file (sdk_v3_requirements.txt, --no-deps: no resolver run,
about 2 minutes instead of 11), quiet and bounded, and cached by content key next to the docker test base image
(`$SMDIST_TEST_CACHE`, else ~/.cache/smdist-tests), so a CI run builds it at most once. A file lock makes a second
session wait for a build in progress instead of starting another; a half-built venv (no `.ready` marker) is rebuilt."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SDK_V3 = "sagemaker==3.27.0"
REQUIREMENTS = Path(__file__).with_name("sdk_v3_requirements.txt")
CACHE = Path(os.environ.get("SMDIST_TEST_CACHE") or Path.home() / ".cache" / "smdist-tests")
PIP_TIMEOUT_S = 20 * 60
LOCK_WAIT_S = PIP_TIMEOUT_S + 5 * 60
_READY = ".ready"


def venv_dir() -> Path:
    key = hashlib.sha256(repr((SDK_V3, REQUIREMENTS.read_text(), sys.version_info[:2])).encode()).hexdigest()[:16]
    return CACHE / f"sdk-v3-{key}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def is_built() -> bool:
    return (venv_dir() / _READY).is_file()


def build() -> Path:
    """The v3 venv's python; built (python -m venv + pip install) when the cache lacks it."""
    if is_built():
        return python()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{venv_dir().name}.lock", "w") as lock:
        _lock(lock)
        if not is_built():
            _build(venv_dir())
    return python()


def _lock(f) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"another build of the SDK v3 venv held {f.name} for {LOCK_WAIT_S} s") from None
            time.sleep(1)


def _build(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)   # a build that died half-way
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, capture_output=True, timeout=300)
    # --no-compile: the clients compile the modules they import, once, into the venv (a CI machine builds this
    # while the suite runs: byte-compiling all of it cost 22 s of CPU of its 2 cores)
    done = subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
                           "--disable-pip-version-check", "--no-input", "--no-deps", "-r", str(REQUIREMENTS)],
                          capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("WARNING"))[-3000:]
        raise RuntimeError(f"pip install {SDK_V3} failed ({done.returncode}): {tail}")
    (target / _READY).write_text(SDK_V3 + "\n")


def prebuild_in_background(log: Path) -> subprocess.Popen[bytes] | None:
    """Start the build in a process of its own when the cache lacks it (the caller stops it by pid)."""
    if is_built():
        return None
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, __file__], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


if __name__ == "__main__":   # the background prebuild
    print(build(), flush=True)
