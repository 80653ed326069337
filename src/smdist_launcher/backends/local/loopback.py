"""The preload library that keeps every listening socket of a local job on loopback (loopback_bind.c).

torch's TCPStore, torchrun's rendezvous and Open MPI's daemons bind "any address" and offer no option to do
otherwise; preloaded, the library turns such binds into binds on the simulated host's loopback address. Built once
with the system C compiler and cached by content."""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("loopback_bind.c")
BIND_ADDRESS_ENV = "SMDIST_BIND_ADDRESS"  # read by the library: the host's own loopback address


class LoopbackLibraryError(OSError):
    """The library could not be built: the job must not start listening on every interface."""


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "smdist-launcher"
    # LD_PRELOAD splits on spaces and colons: such a path cannot be preloaded
    if any(c in str(base) for c in " :"):
        base = Path(tempfile.gettempdir()) / f"smdist-launcher-{os.getuid()}"
    return base


def loopback_library() -> Path:
    """The built library (cached); LoopbackLibraryError when no C compiler can build it."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = _cache_dir() / f"loopback-bind-{digest}-{platform.machine()}.so"
    if target.is_file():
        return target
    cc = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")
    if cc is None:
        raise LoopbackLibraryError(
            "local mode keeps the job's ports on loopback with a small preloaded library, which needs a C compiler: "
            "install one (apt-get install -y gcc, or bash scripts/bootstrap.sh) or set $CC")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise LoopbackLibraryError(f"building {SOURCE.name} with {cc} failed: {proc.stderr.strip()[-2000:]}")
        os.replace(tmp, target)  # atomic: concurrent jobs may build it at the same time
    except (OSError, subprocess.SubprocessError) as exc:
        if isinstance(exc, LoopbackLibraryError):
            raise
        raise LoopbackLibraryError(f"building {SOURCE.name} with {cc} failed: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def confinement_env(address: str, environ: dict[str, str]) -> dict[str, str]:
    """LD_PRELOAD (the library first, the caller's own preloads kept) and the host's bind address."""
    preload = [str(loopback_library()), *(p for p in environ.get("LD_PRELOAD", "").replace(":", " ").split() if p)]
    return {"LD_PRELOAD": " ".join(dict.fromkeys(preload)), BIND_ADDRESS_ENV: address}
