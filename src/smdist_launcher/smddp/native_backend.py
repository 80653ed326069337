"""The native smddp backend (native/smddp/smddp_backend.cpp): build, load, create.

On a machine with CUDA, ``init_process_group("smddp")`` gets a C++ ``c10d::Backend`` that runs
smddp's own Lamport one-shot AllReduce kernel (lamport_allreduce.cu) and torch's symmetric-memory
AllReduce without per-call Python and delegates everything else to an inner ProcessGroupNCCL (CUDA)
or the Python gloo path (CPU). It is compiled on first use with torch's C++ extension tooling
(``torch.utils.cpp_extension.load``, about a minute), cached per torch version and source hash under
``$SMDDP_NATIVE_CACHE`` (default ``~/.cache/smdist_launcher/native``). Without nvcc the backend is
built from the C++ source alone (no Lamport kernel: those sizes use torch's kernels or NCCL).
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
from .fast_allgather import CeOptions, ce_options
from .fast_setup import check_same_routes
from .native import _cache_dir, enabled_source, native_source
from .routing import LAMPORT_MAX_LIMIT, CEIssuer, Router, native_route_codes, route_plan

log = logging.getLogger("smdist_launcher.smddp")

SOURCE_NAME = "smddp_backend.cpp"
KERNEL_NAME = "lamport_allreduce.cu"
CE_HEADER_NAME = "ce_driver.h"
_module: ModuleType | None = None
_reason: str | None = None


def source_path() -> Path | None:
    return native_source(SOURCE_NAME)


# A compiler that links its C++ runtime statically (seen on the GPU image: /opt/gcc's g++) puts a private copy of
# libstdc++ into the extension, exported, so that the dynamic linker binds some of its calls to the libstdc++ torch
# loaded and keeps others (anonymous-namespace helpers) in the copy. Formatting a number into an error message then
# looked up a facet by one copy's id in the other's locale: every TORCH_CHECK with a number segfaulted instead of
# raising. Hidden, the copy is used whole; with a shared runtime (no static archive) the flag changes nothing.
LDFLAGS = ["-ldl", "-Wl,--exclude-libs,ALL"]


def build_plan(src: Path, kernel: Path | None) -> tuple[str, list[str], list[str]]:
    """(extension name, sources, C++ flags): the name changes with every source byte, flag and torch."""
    sources = [src] + ([kernel] if kernel is not None else [])
    # The copy-engine choreography header (ce_driver.h) is compiled in too: its bytes are part of the name.
    headers = [h for h in (src.with_name(CE_HEADER_NAME),) if h.is_file()]
    flags = ["-O2"] + (["-DSMDDP_LAMPORT"] if kernel is not None else [])
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources + headers) + torch.__version__.encode()
                            + " ".join(flags + LDFLAGS).encode()).hexdigest()[:12]
    return f"smddp_backend_{digest}", [str(p) for p in sources], flags


def _build(src: Path, kernel: Path | None) -> ModuleType:
    from torch.utils import cpp_extension  # imported here: slow, and only machines with CUDA need it

    name, sources, flags = build_plan(src, kernel)
    build_dir = _cache_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    if not any(build_dir.glob(f"{name}*.so")):
        log.warning("smddp: building the native backend from %s (first use only, about a minute)", ", ".join(sources))
    # load() takes a file lock in build_dir, so ranks starting together build once. A copy of LDFLAGS: load() appends
    # torch's libraries to the list it is given (in place), which would change every later build's flags and name.
    return cpp_extension.load(
        name=name, sources=sources, build_directory=str(build_dir), extra_cflags=flags,
        extra_cuda_cflags=["-O3"], extra_ldflags=list(LDFLAGS), verbose=False,
    )


def load() -> ModuleType | None:
    """The compiled extension, or None (the reason logged once, kept in :func:`unavailable_reason`)."""
    global _module, _reason
    if _module is not None or _reason is not None:
        return _module
    try:
        src = enabled_source("SMDDP_NATIVE_BACKEND", SOURCE_NAME)
        kernel = native_source(KERNEL_NAME) if os.environ.get("SMDDP_LAMPORT", "1") != "0" else None
        try:
            _module = _build(src, kernel)
        except Exception as exc:  # nvcc missing or failing: the backend without the kernel
            if kernel is None:
                raise
            log.warning("smddp: the Lamport AllReduce kernel did not build (%s); building the backend without it",
                        f"{type(exc).__name__}: {str(exc).strip()[-400:]}")
            _module = _build(src, None)
    except Exception as exc:  # noqa: BLE001  any build failure (compiler, ninja, headers) means: fall back
        _reason = f"{type(exc).__name__}: {str(exc).strip()[-400:]}"
        log.warning("smddp: native backend unavailable (%s); using the Python process group", _reason)
    return _module


def unavailable_reason() -> str | None:
    return _reason


class NativeHelper:
    """What the C++ backend calls Python for, off the per-call path: the CPU (gloo) path, the
    one-time collective set-up of the symmetric buffers, the copy-engine AllGather, barrier."""

    def __init__(
        self, store: dist.Store, rank: int, size: int, timeout: timedelta, lamport_bytes: int = 0,
        options: CeOptions | None = None, native_ce: bool = False,
    ) -> None:
        self.store, self.rank, self.size, self.timeout = store, rank, size, timeout
        self.ce_options = options or ce_options(size)  # read once, at init_process_group
        self.native_ce = native_ce  # the C++ backend can issue the copy-engine AllGather itself
        self.lamport_bytes = lamport_bytes  # largest Lamport AllReduce (0: none)
        self._lamport: tuple[Any, ...] | None = None
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
        from .fast_setup import set_up_fast_paths

        paths = set_up_fast_paths(self.store, self.rank, self.size, self.timeout, device, group_uid, self.ce_options,
                                  native_issuer=self.native_ce)
        if isinstance(paths, str):
            return paths
        try:
            from .symm_buffers import GrowingPair

            self._pair = GrowingPair(paths.symm_name, device, self.size, minimum=4 << 20)
        except (ImportError, AttributeError, RuntimeError) as exc:  # torch without symmetric memory
            return f"symmetric memory unavailable ({exc})"
        self.symm_name, self.allgather = paths.symm_name, paths.allgather
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

    def lamport_buffers(self, device_index: int, group_uid: str) -> tuple[Any, ...] | None:
        """(this rank's buffer, every rank's buffer address, region bytes, timeout in s) for the
        Lamport kernel, or None when it cannot run here. Collective (first Lamport call)."""
        device = torch.device("cuda", device_index)
        if self.lamport_bytes <= 0 or self.size > LAMPORT_MAX_RANKS or not self._ready(device, group_uid):
            return None
        from .symm_buffers import lamport_buffer

        buffer, handle, peers = lamport_buffer(self.symm_name, device, self.size, self.lamport_bytes)
        # Every rank's sentinel fill is done before any peer's first store lands.
        torch.cuda.synchronize(device)
        self.cpu.pg.barrier(dist.BarrierOptions()).wait()
        self._lamport = (buffer, handle)  # the rendezvous keeps the peers' mappings alive
        return buffer, peers, self.lamport_bytes, lamport_timeout_s(self.timeout)

    def allgather_ce(self, output: torch.Tensor, input: torch.Tensor, group_uid: str) -> bool:
        """Run the copy-engine AllGather; False: NCCL serves the call (the same on every rank)."""
        from .fast_allgather import CopyEngineAllGather

        if not CopyEngineAllGather.eligible(output, input, self.size) or CopyEngineAllGather.capturing():
            return False  # (capture: before the set-up, which then waits for the first eager call)
        if not self._ready(output.device, group_uid):
            return False
        self.allgather(output, input)
        return True

    def allgather_ce_state(self, device_index: int, nbytes: int, group_uid: str) -> tuple[Any, ...] | str:
        """For the C++ backend's copy-engine AllGather of ``nbytes`` per rank: "off" (NCCL serves, on every
        rank alike), "python" (each call through :meth:`allgather_ce`), or what C++ issues the calls with
        (CopyEngineAllGather.native_state). Collective: every rank asks at the same call (the first, and
        each that needs larger buffers; the C++ side has dropped its references to the old ones)."""
        if not self._ready(torch.device("cuda", device_index), group_uid):
            return "off"
        if not self.allgather.native_issuer:
            return "python"
        return self.allgather.native_state(nbytes)

    def agree(self, ok: bool) -> bool:
        """True when ``ok`` is True on every rank. Collective, over the CPU group: what one rank could set up
        alone (the C++ copy-engine state) must decide the path of all of them alike."""
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp(dist.ReduceOp.MIN)
        self.cpu.pg.allreduce([flag], opts).wait()
        return bool(flag.item())

    def allgather_ce_plan(self, nbytes: int) -> tuple[tuple[int, int], ...]:
        """The parts of a call of ``nbytes`` per rank (cached; C++ caches them too, per plan version)."""
        return self.allgather.plan(nbytes)

    def barrier(self) -> dist.Work:
        # GPU work queued before the barrier finishes first (as NCCL's barrier), then a host barrier.
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return self.cpu.pg.barrier(dist.BarrierOptions())


def create(module: ModuleType, store: dist.Store, rank: int, size: int, timeout: timedelta) -> Any:
    """A native SmddpBackend for one group (the registered creator calls this on CUDA machines)."""
    # Settings first (SMDDP_ROUTES, SMDDP_LAMPORT_*, SMDDP_CE_*): a bad one fails here, at init_process_group,
    # before anything is built, not at the first call. The CE settings are read once for the group's lifetime.
    ce = ce_options(size)
    router = native_router(module, ce, torch.cuda.get_device_name())
    lamport_timeout_s(timeout)
    region = lamport_region_bytes(router, size)
    check_same_routes(store, rank, size, route_plan(router, size, "native", region))
    options = dist.ProcessGroupNCCL.Options()
    options._timeout = timeout
    nccl = dist.ProcessGroupNCCL(dist.PrefixStore("smddp/nccl/", store), rank, size, options)
    helper = NativeHelper(store, rank, size, timeout, region, ce, native_ce=bool(getattr(module, "CE_NATIVE", False)))
    return module.SmddpBackend(rank, size, nccl, helper, native_route_codes(router, size))


def ce_issuer(module: Any, options: CeOptions) -> CEIssuer:
    """Who issues this build's copy-engine AllGather (routing.CE_ISSUER_ROUTES): C++ where it was built with
    its issuer (CE_NATIVE) and stages with a memcpy, else Python per call, in parts with the ctypes helper."""
    if options.kernel_stage:  # the SM staging copy: the Python choreography, one part
        return CEIssuer.PYTHON
    if getattr(module, "CE_NATIVE", False):
        return CEIssuer.BACKEND
    return CEIssuer.PYTHON if os.environ.get("SMDDP_NATIVE", "1") == "0" else CEIssuer.HELPER


def native_router(module: Any, options: CeOptions, gpu: str) -> Router:
    """The routes of a native backend built as ``module``: the AllGather's table follows who issues it, so that
    a build without the C++ issuer does not send sizes only that issuer won to a path measured slower than NCCL."""
    return Router(native=True, gpu=gpu, lamport=bool(getattr(module, "LAMPORT", False)),
                  ce_issuer=ce_issuer(module, options))


LAMPORT_MAX_RANKS = 8  # lamport_allreduce.cu: kMaxRanks


def lamport_region_bytes(router: Router, group_size: int) -> int:
    """Bytes each rank reserves per peer and slot for the Lamport kernel: the largest size the
    routes send to it (``SMDDP_LAMPORT_BYTES`` overrides, e.g. to force larger sizes onto it),
    rounded up to 16. The buffer is 2 x group_size x this."""
    env = os.environ.get("SMDDP_LAMPORT_BYTES", "").strip()
    if env:
        # Whole bytes up to the routes' own bound: a larger region is reserved 2 x ranks times per GPU.
        wanted = int(env) if env.isascii() and env.isdigit() and len(env) <= 18 else -1
        if not 0 <= wanted <= LAMPORT_MAX_LIMIT:
            raise ValueError(f"SMDDP_LAMPORT_BYTES={env!r}: expected a number of bytes from 0 to {LAMPORT_MAX_LIMIT}, "
                             "e.g. 4194304")
    else:
        wanted = max((limit for coll in ("all_reduce", "all_reduce_async")
                      for limit, path in router.table.get((coll, group_size), ()) if path == "lamport"), default=0)
    if group_size < 2 or group_size > LAMPORT_MAX_RANKS:
        return 0
    return -(-max(wanted, 0) // 16) * 16


LAMPORT_TIMEOUT_MAX_S = 7 * 24 * 3600.0  # the kernel counts nanoseconds in 64 bits: keep far inside


def lamport_timeout_s(group_timeout: timedelta) -> float:
    """Seconds a Lamport AllReduce waits for a peer before it stops the CUDA context:
    ``SMDDP_LAMPORT_TIMEOUT_S``, else the group's timeout (both capped at a week)."""
    env = os.environ.get("SMDDP_LAMPORT_TIMEOUT_S", "").strip()
    if not env:
        return min(max(group_timeout.total_seconds(), 1.0), LAMPORT_TIMEOUT_MAX_S)
    try:
        value = float(env)
    except ValueError:
        value = float("nan")
    if not 0 < value <= LAMPORT_TIMEOUT_MAX_S:  # also NaN
        raise ValueError(f"SMDDP_LAMPORT_TIMEOUT_S={env!r}: expected seconds, a number above 0 and at most "
                         f"{LAMPORT_TIMEOUT_MAX_S:.0f} (a week), e.g. 300")
    return value


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
    from .routing import NATIVE_COLL_CODES, NATIVE_PATH_CODES, check_forced

    if collective not in NATIVE_COLL_CODES:
        raise ValueError(f"smddp force path: collective {collective!r} is not one of {tuple(NATIVE_COLL_CODES)}")
    if path is None:
        backend.unforce(NATIVE_COLL_CODES[collective])
    else:
        check_forced(collective, path)
        backend.force(NATIVE_COLL_CODES[collective], NATIVE_PATH_CODES[path])
