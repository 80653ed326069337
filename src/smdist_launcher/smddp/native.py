"""Build-on-first-use loader for the native copy-engine helper (native/smddp/ce_pull.cpp).

It needs only a C++ compiler (no CUDA toolkit: the helper dlopens the driver), builds in well
under a second, and is cached per source hash. Without a compiler, or with ``SMDDP_NATIVE=0``,
smddp says so once and issues the same copies from Python (about 2.5x more host time per call).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger("smdist_launcher.smddp")

SOURCE_NAME = "ce_pull.cpp"
HEADER_NAME = "ce_driver.h"  # the choreography, shared with the native backend (smddp_backend.cpp)
_loaded: ctypes.CDLL | None = None
_reason: str | None = None


def native_source(name: str) -> Path | None:
    """native/smddp/<name> of the source tree, or a copy shipped inside the package."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "native" / "smddp" / name, here.with_name(name)):
        if candidate.is_file():
            return candidate
    return None


def enabled_source(switch: str, name: str) -> Path:
    """The source to build, unless the environment variable ``switch`` is ``0`` or it is not installed."""
    if os.environ.get(switch, "1") == "0":
        raise RuntimeError(f"{switch}=0")
    src = native_source(name)
    if src is None:
        raise RuntimeError(f"{name} is not in this installation")
    return src


def _cache_dir() -> Path:
    root = os.environ.get("SMDDP_NATIVE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")), "smdist_launcher", "native"
    )
    return Path(root)


def helper_digest(src: Path) -> str:
    """The cached library's name part: every byte compiled into it (the source and the header it includes)."""
    header = src.with_name(HEADER_NAME)
    return hashlib.sha256(src.read_bytes() + (header.read_bytes() if header.is_file() else b"")).hexdigest()[:16]


def _build(src: Path) -> Path:
    target = _cache_dir() / f"libsmddp_ce-{helper_digest(src)}.so"
    if target.is_file():
        return target
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        raise RuntimeError("no C++ compiler found (set CXX or install g++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    log.warning("smddp: building the native copy-engine helper from %s (first use only)", src)
    # Several ranks may build at once: each writes its own temp file, the rename is atomic.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", str(src), "-o", tmp, "-ldl"],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, target)
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"{compiler} failed: {exc.stderr.strip()[-500:]}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _declare(lib: ctypes.CDLL) -> None:
    vp, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    u64, pp = ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)
    lib.smddp_ce_init.argtypes = []
    lib.smddp_ce_current_context.argtypes = [pp]
    lib.smddp_ce_make_events.argtypes = [i, pp]
    lib.smddp_ce_stage.argtypes = [vp, vp, vp, pp, u64, u64, u64, sz, i]
    lib.smddp_ce_pull.argtypes = [vp, vp, pp, pp, u64, ctypes.POINTER(u64), sz, i, i, i, i]
    lib.smddp_ce_stage_part.argtypes = [vp, vp, vp, pp, u64, u64, u64, sz, sz, sz, i, i]
    lib.smddp_ce_pull_part.argtypes = [vp, vp, pp, pp, u64, ctypes.POINTER(u64), sz, sz, sz, i, i, i, i]
    lib.smddp_ce_join.argtypes = [vp, vp, pp, i, pp]
    for fn in ("smddp_ce_init", "smddp_ce_current_context", "smddp_ce_make_events", "smddp_ce_stage", "smddp_ce_pull",
               "smddp_ce_stage_part", "smddp_ce_pull_part", "smddp_ce_join"):
        getattr(lib, fn).restype = i


def load() -> ctypes.CDLL | None:
    """The helper library, or None (with the reason logged once) when it cannot be had."""
    global _loaded, _reason
    if _loaded is not None or _reason is not None:
        return _loaded
    try:
        lib = ctypes.CDLL(str(_build(enabled_source("SMDDP_NATIVE", SOURCE_NAME))))
        _declare(lib)
        rc = lib.smddp_ce_init()
        if rc != 0:
            raise RuntimeError(f"cannot reach the CUDA driver (libcuda.so.1), code {rc}")
        _loaded = lib
    except (RuntimeError, OSError) as exc:
        _reason = str(exc)
        log.info("smddp: native copy-engine helper unavailable (%s); issuing copies from Python", _reason)
    return _loaded


def unavailable_reason() -> str | None:
    return _reason
