"""The native smddp backend (native/smddp/smddp_backend.cpp): build, load, create.

On a machine with CUDA, ``init_process_group("smddp")`` gets a C++ ``c10d::Backend`` that runs the
symmetric-memory AllReduce without per-call Python and delegates everything else to an inner
ProcessGroupNCCL (CUDA) or the Python gloo path (CPU). It is compiled on first use with torch's C++
extension tooling (``torch.utils.cpp_extension.load``, about a minute), cached per torch version and
source hash under ``$SMDDP_NATIVE_CACHE`` (default ``~/.cache/smdist_launcher/native``).
No compiler, a failed build or ``SMDDP_NATIVE_BACKEND=0``: one warning with the reason, and the
Python process group (process_group.SmddpProcessGroup) serves, as before.
"""
from __future__ import annotations

import hashlib
import logging
import os
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from .cpu_path import GlooPath
from .native import _cache_dir, enabled_source, native_source
from .routing import Router, native_route_codes

log = logging.getLogger("smdist_launcher.smddp")

SOURCE_NAME = "smddp_backend.cpp"
_module: ModuleType | None = None
_reason: str | None = None


def source_path() -> Path | None:
    return native_source(SOURCE_NAME)


def _build(src: Path) -> ModuleType:
    from torch.utils import cpp_extension  # imported here: slow, and only machines with CUDA need it

    digest = hashlib.sha256(src.read_bytes() + torch.__version__.encode()).hexdigest()[:12]
    name = f"smddp_backend_{digest}"
    build_dir = _cache_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    if not any(build_dir.glob(f"{name}*.so")):
        log.warning("smddp: building the native backend from %s (first use only, about a minute)", src)
    # load() takes a file lock in build_dir, so ranks starting together build once.
    return cpp_extension.load(
        name=name, sources=[str(src)], build_directory=str(build_dir), extra_cflags=["-O2"], verbose=False
    )


def load() -> ModuleType | None:
    """The compiled extension, or None (the reason logged once, kept in :func:`unavailable_reason`)."""
    global _module, _reason
    if _module is not None or _reason is not None:
        return _module
    try:
        _module = _build(enabled_source("SMDDP_NATIVE_BACKEND", SOURCE_NAME))
    except Exception as exc:  # noqa: BLE001  any build failure (compiler, ninja, headers) means: fall back
        _reason = f"{type(exc).__name__}: {str(exc).strip()[-400:]}"
        log.warning("smddp: native backend unavailable (%s); using the Python process group", _reason)
    return _module


def unavailable_reason() -> str | None:
    return _reason


class NativeHelper:
    """What the C++ backend calls Python for, off the per-call path: the CPU (gloo) path, the
    one-time collective set-up of the symmetric buffers, the copy-engine AllGather, barrier."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        self.store, self.rank, self.size, self.timeout = store, rank, size, timeout
        self.cpu = GlooPath(store, rank, size, timeout)
        self._state: str | None = None  # None = not decided, "on", or why the fast paths are off
        self._pair: Any = None
        self._scratch: torch.Tensor | None = None
        self.allgather: Any = None
        self.symm_name = ""

    def _ready(self, device: torch.device, group_uid: str) -> bool:
        if self._state is None:
            self._state = self._set_up(device, group_uid)
            if self._state != "on":
                log.info("smddp: NVLink fast paths off for this group: %s", self._state)
        return self._state == "on"

    def _set_up(self, device: torch.device, group_uid: str) -> str:
        if os.environ.get("SMDDP_DISABLE_FAST_PATHS", "0") == "1":
            return "SMDDP_DISABLE_FAST_PATHS=1"
        if self.size < 2:
            return "group of one rank"
        if not group_uid:
            return "the group has no name yet"
        from .topology import exchange_locations, single_nvlink_island

        ok, why = single_nvlink_island(exchange_locations(self.store, self.rank, self.size, device.index or 0))
        if not ok:
            return why
        try:
            from .fast_allgather import CopyEngineAllGather
            from .symm_buffers import GrowingPair, register_group

            self.symm_name = register_group(group_uid, self.store, self.rank, self.size, self.timeout)
            serial = os.environ.get("SMDDP_CE_SERIAL", "1" if self.size > 2 else "0") == "1"
            splits = int(os.environ.get("SMDDP_CE_SPLITS", "1"))
            self.allgather = CopyEngineAllGather(self.symm_name, device, self.rank, self.size, splits, serial)
            self._pair = GrowingPair(self.symm_name, device, self.size, minimum=4 << 20)
        except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
            return f"symmetric memory unavailable ({exc})"
        return "on"

    def allreduce_buffers(self, device_index: int, nbytes: int, group_uid: str) -> tuple[Any, ...] | None:
        """(symmetric group name, buffer 0, buffer 1, scratch of twice their size) holding nbytes,
        or None when the fast paths are off. Collective: every rank calls it at the same call."""
        if not self._ready(torch.device("cuda", device_index), group_uid):
            return None
        if self._pair.pair is not None and self._pair.pair.capacity < nbytes:
            # Growing frees the old buffers: no kernel of any rank may still be reading them.
            torch.cuda.synchronize(device_index)
            self.cpu.pg.barrier(dist.BarrierOptions()).wait()
        pair = self._pair.get(nbytes)
        if self._scratch is None or self._scratch.numel() < 2 * pair.capacity:
            self._scratch = torch.empty(2 * pair.capacity, dtype=torch.uint8, device=pair.buffers[0].device)
        return self.symm_name, pair.buffers[0], pair.buffers[1], self._scratch

    def allgather_ce(self, output: torch.Tensor, input: torch.Tensor, group_uid: str) -> bool:
        from .fast_allgather import CopyEngineAllGather

        if not CopyEngineAllGather.eligible(output, input, self.size) or not self._ready(output.device, group_uid):
            return False
        self.allgather(output, input)
        return True

    def barrier(self) -> dist.Work:
        # GPU work queued before the barrier finishes first (as NCCL's barrier), then a host barrier.
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return self.cpu.pg.barrier(dist.BarrierOptions())


def create(module: ModuleType, store: dist.Store, rank: int, size: int, timeout: timedelta) -> Any:
    """A native SmddpBackend for one group (the registered creator calls this on CUDA machines)."""
    options = dist.ProcessGroupNCCL.Options()
    options._timeout = timeout
    nccl = dist.ProcessGroupNCCL(dist.PrefixStore("smddp/nccl/", store), rank, size, options)
    helper = NativeHelper(store, rank, size, timeout)
    router = Router(native=True, gpu=torch.cuda.get_device_name())
    return module.SmddpBackend(rank, size, nccl, helper, native_route_codes(router, size))


def native_backend_of(group: Any) -> Any:
    """The native SmddpBackend serving ``group``'s CUDA tensors, or None (Python group, other backend)."""
    if _module is None or not isinstance(group, dist.ProcessGroup) or not torch.cuda.is_available():
        return None
    try:
        backend = group._get_backend(torch.device("cuda"))
    except RuntimeError:
        return None
    return backend if isinstance(backend, _module.SmddpBackend) else None


def force_native_path(backend: Any, collective: str, path: str | None) -> None:
    from .routing import NATIVE_COLL_CODES, NATIVE_PATH_CODES

    if collective not in NATIVE_COLL_CODES:
        raise ValueError(f"smddp force path: collective {collective!r} is not one of {tuple(NATIVE_COLL_CODES)}")
    if path is None:
        backend.unforce(NATIVE_COLL_CODES[collective])
    elif path not in NATIVE_PATH_CODES:
        raise ValueError(f"smddp force path: {path!r} is not one of {tuple(NATIVE_PATH_CODES)}")
    else:
        backend.force(NATIVE_COLL_CODES[collective], NATIVE_PATH_CODES[path])
