"""Size routing: which path runs a CUDA collective of a given size on a given group size.

The table was chosen by measurement on 4x H200 (docs/benchmarks.md, `benchmarks/collectives.py`
and its ``--probe`` mode): a fast path is listed only for the sizes where it was at least as fast
as NCCL in those runs; every other size goes to NCCL, so routing never makes smddp meaningfully
slower than NCCL. Group sizes not listed (3, 5-8, multi-node) always use NCCL.

Sizes are the bytes of the collective's *output* for all_gather (nccl-tests' convention), of the
tensor for all_reduce, and of the *input* for reduce_scatter. ``all_reduce_async`` (native backend
only) routes asynchronous AllReduce calls (``async_op=True``: DDP's gradient buckets) where listed;
without an entry they follow ``all_reduce``. Where the two differ, every rank must issue a given
call with the same ``async_op`` (DDP does).
``SMDDP_ROUTES`` (JSON, same shape as ``DEFAULT_ROUTES`` with string keys ``"all_gather/4"``)
replaces entries without a code change.
"""
from __future__ import annotations

import json
import os
from enum import Enum

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
UNBOUNDED = 1 << 62

PATHS = ("nccl", "ce", "one_shot", "two_shot", "lamport")

# (collective, group size) -> [(largest size in bytes, path), ...] ascending; first match wins.
Route = list[tuple[int, str]]
DEFAULT_ROUTES: dict[tuple[str, int], Route] = {
    # 2 GPUs: the copy-engine pull beat NCCL by 5-10% from 128 MiB to 512 MiB and tied at 1 GiB
    # (0.99-1.02x); below 128 MiB its ~130 us of host work per call lose to NCCL.
    ("all_gather", 2): [(128 * MiB - 1, "nccl"), (UNBOUNDED, "ce")],
    # 4 GPUs: serial pulls tie NCCL at 256 MiB-1 GiB (1.00-1.01x) without using SMs; below,
    # host overhead makes them slower.
    ("all_gather", 4): [(256 * MiB - 1, "nccl"), (UNBOUNDED, "ce")],
    # all_reduce: one-shot (37-40 us) and two-shot never beat NCCL (22-37 us) in eager mode on
    # 2 or 4 GPUs; both stay available through force_path / SMDDP_ROUTES.
}

# The native backend (native_backend.py) issues the same kernels without per-call Python (the
# 20-40 us that made them lose above), so its AllReduce routes differ. Chosen from the forced
# paths of benchmarks/collectives.py on 2x H100 (docs/benchmarks.md, 2026-11-27): eager, one-shot
# took 25-26 us up to 2 MiB against NCCL's 42-48 us; at 4 MiB two-shot won (35-45 us vs 46 us)
# eager and in a graph; from 16 MiB NCCL. 4 GPUs unmeasured with the native backend: NCCL.
NATIVE_ROUTES: dict[tuple[str, int], Route] = {
    **DEFAULT_ROUTES,
    ("all_reduce", 2): [(2 * MiB, "one_shot"), (4 * MiB, "two_shot")],
}

# With smddp's own Lamport one-shot kernel (native/smddp/lamport_allreduce.cu; the backend built
# with nvcc): no barrier step and no per-call allocation, asynchronous calls (DDP buckets) too.
# 2x H100 (docs/benchmarks.md, 2026-11-27 18:29 and 18:38 UTC, two runs): 8 KiB-4 MiB eager
# 11-22 us against NCCL's 28-60 us, in a CUDA graph 5-20 us against 10-37 us; 16 MiB 1.04-1.11x
# NCCL's busbw; 32 MiB 0.88-0.91x and 64 MiB 0.81x (one-shot moves ~6x the tensor through HBM):
# NCCL from there. 4x H100 (docs/benchmarks.md, 2026-11-27 19:16 UTC): 8-512 KiB eager 17-23 us against
# NCCL's 41-57 us, in a CUDA graph 8-18 us against 15-21 us; from 1 MiB mixed (bf16 1 MiB in a graph 30 us
# against NCCL's 25): NCCL from there. 8 GPUs not measured: NCCL.
LAMPORT_ROUTES: dict[tuple[str, int], Route] = {
    ("all_reduce", 2): [(16 * MiB, "lamport")],
    ("all_reduce", 4): [(512 * KiB, "lamport")],
}

# Per GPU model, where the copy-engine AllGather measured differently from the H200 table above.
# 2x H100, 2026-11-28 00:31 UTC (benchmarks/collectives.py --ag-pipeline --ag-variants ce:default, bf16,
# docs/benchmarks.md "issue 31"): the AllGather issued whole by the native backend (no Python per call), its
# staging pipelined in the default parts, the own chunk copied after the first part's staging; against NCCL
# in the same run: 32 MiB 1.27x, 64 MiB 1.18x, 128 MiB 1.15x, 256 MiB 1.12x, 512 MiB 1.09x, 1 GiB 1.04x (every
# cell equal to NCCL's output). So the copy engines from 32 MiB to 1 GiB; below 32 MiB (16 MiB lost, 0.83-0.93x,
# 2026-11-27, with Python per call; not re-measured) and above 1 GiB (not measured; the ratio falls with size) NCCL.
GPU_ROUTES: dict[str, dict[tuple[str, int], Route]] = {
    "H100": {("all_gather", 2): [(32 * MiB - 1, "nccl"), (1 * GiB, "ce"), (UNBOUNDED, "nccl")]},
}
# The native backend whose AllGather goes through the Python helper per call (CE_NATIVE false: built without
# nvcc or with SMDDP_LAMPORT=0; its copies issued by the ctypes helper, pipelined, GIL per call): the table
# measured for that path, 2x H100, 2026-11-27 21:35 UTC, before C++ issued the calls: 32 MiB 1.08x, 64 MiB
# 1.05-1.07x, 128 MiB 1.05x, 256 MiB 1.03x, 512 MiB 1.01x, 1 GiB 0.98x: the copy engines below 512 MiB.
HELPER_GPU_ROUTES: dict[str, dict[tuple[str, int], Route]] = {
    "H100": {("all_gather", 2): [(32 * MiB - 1, "nccl"), (512 * MiB - 1, "ce"), (UNBOUNDED, "nccl")]},
}
# The Python group (SMDDP_NATIVE_BACKEND=0, or no compiler) stages in one part: on 2x H100 the unpipelined
# copy engines measured 1.00-1.04x from 64 MiB to 128 MiB (2026-11-27 runs 1 and 2), 0.98x at 256 MiB, 0.96x at
# 512 MiB and 0.92x at 1 GiB (21:35 UTC): the copy engines below 256 MiB only, not the H200 table's 1 GiB.
PYTHON_GPU_ROUTES: dict[str, dict[tuple[str, int], Route]] = {
    "H100": {("all_gather", 2): [(64 * MiB - 1, "nccl"), (256 * MiB - 1, "ce"), (UNBOUNDED, "nccl")]},
}


class CEIssuer(str, Enum):
    """Who issues a native backend's copy-engine AllGather, and so which measured table routes it (a str: a member
    equals its value)."""

    BACKEND = "backend"  # C++ itself: GPU_ROUTES
    HELPER = "helper"  # the Python helper per call, in parts: HELPER_GPU_ROUTES
    PYTHON = "python"  # the Python choreography in one part (SMDDP_CE_KERNEL_STAGE=1 or no helper): PYTHON_GPU_ROUTES


CE_ISSUER_ROUTES: dict[CEIssuer, dict[str, dict[tuple[str, int], Route]]] = {
    CEIssuer.BACKEND: GPU_ROUTES, CEIssuer.HELPER: HELPER_GPU_ROUTES, CEIssuer.PYTHON: PYTHON_GPU_ROUTES,
}

# Codes the C++ backend uses (smddp_backend.cpp: enum Coll, enum Path).
NATIVE_COLL_CODES = {"all_reduce": 0, "all_gather": 1, "reduce_scatter": 2, "all_reduce_async": 3}
NATIVE_PATH_CODES = {"nccl": 0, "ce": 1, "one_shot": 2, "two_shot": 3, "lamport": 4}


# What each collective can run on (a path listed elsewhere would silently never run there).
# all_reduce_async: the native backend runs asynchronous AllReduce only on NCCL or the Lamport kernel.
COLLECTIVE_PATHS: dict[str, tuple[str, ...]] = {
    "all_gather": ("nccl", "ce"),
    "all_reduce": ("nccl", "one_shot", "two_shot", "lamport"),
    "all_reduce_async": ("nccl", "lamport"),
    "reduce_scatter": ("nccl",),
}
# The largest limit: the C++ backend holds limits as int64; UNBOUNDED already covers every tensor.
MAX_LIMIT = UNBOUNDED
# The Lamport kernel reserves 2 x ranks x its largest routed size per GPU (native_backend.lamport_region_bytes):
# a route may not send it more than this, or the first call would try to allocate that much.
LAMPORT_MAX_LIMIT = 1 * GiB
_EXAMPLE = '{"all_gather/4": [[8388608, "nccl"], [4611686018427387904, "ce"]]}'


def _load_overrides() -> dict[tuple[str, int], Route]:
    raw = os.environ.get("SMDDP_ROUTES", "").strip()
    if not raw:
        return {}
    try:
        return parse_routes(json.loads(raw))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        raise ValueError(
            f"SMDDP_ROUTES: {exc}. Expected JSON like {_EXAMPLE} (limits ascending); "
            "unset SMDDP_ROUTES to use the measured defaults."
        ) from exc


def parse_routes(data: object) -> dict[tuple[str, int], Route]:
    """SMDDP_ROUTES' decoded JSON as a route table; ValueError naming the key and what is allowed.
    Limits must be whole numbers in strictly ascending order (first match wins: a sorted copy of an
    unsorted list would mean something else than it reads), each path one its collective can take."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object of \"<collective>/<group size>\" keys, got {type(data).__name__}")
    table: dict[tuple[str, int], Route] = {}
    for key, entries in data.items():
        coll, slash, size = key.partition("/")
        if coll not in COLLECTIVE_PATHS or not slash or not (size.isascii() and size.isdigit()) or int(size) < 1:
            raise ValueError(f"key {key!r}: expected \"<collective>/<group size>\" with a collective among "
                             f"{tuple(COLLECTIVE_PATHS)} and a group size >= 1, e.g. \"all_gather/4\"")
        if not isinstance(entries, list):
            raise ValueError(f"{key}: expected a list of [largest bytes, path] pairs, got {entries!r}")
        route: Route = []
        for i, entry in enumerate(entries):
            where = f"{key}[{i}]"
            if not (isinstance(entry, list) and len(entry) == 2):
                raise ValueError(f"{where}: expected a [largest bytes, path] pair, got {entry!r}")
            limit, path = entry
            if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
                raise ValueError(f"{where}: limit {limit!r} is not a whole number of bytes from 0 to {MAX_LIMIT}")
            if path not in COLLECTIVE_PATHS[coll]:
                raise ValueError(f"{where}: path {path!r} is not one {coll} can take {COLLECTIVE_PATHS[coll]}")
            if path == "lamport" and limit > LAMPORT_MAX_LIMIT:
                raise ValueError(f"{where}: the Lamport kernel reserves its largest size per peer; {limit} is above "
                                 f"{LAMPORT_MAX_LIMIT} (route larger sizes to nccl)")
            if route and limit <= route[-1][0]:
                raise ValueError(f"{where}: limit {limit} is not above the previous {route[-1][0]} "
                                 "(limits ascend: first match wins)")
            route.append((limit, path))
        table[(coll, int(size))] = route
    return table


class Router:
    """Picks a path per call; ``force`` pins one collective to one path (benchmarks, tests)."""

    def __init__(
        self, table: dict[tuple[str, int], Route] | None = None, native: bool = False, gpu: str = "",
        lamport: bool = False, ce_issuer: CEIssuer | str = CEIssuer.BACKEND,
    ) -> None:
        """``ce_issuer`` (native only): who issues the copy-engine AllGather (CE_ISSUER_ROUTES)."""
        try:
            issuer = CEIssuer(ce_issuer)
        except ValueError:
            allowed = tuple(i.value for i in CEIssuer)
            raise ValueError(f"smddp routing: ce_issuer {ce_issuer!r} is not one of {allowed}") from None
        self.table = dict(NATIVE_ROUTES if native else DEFAULT_ROUTES)
        if native and lamport:
            self.table.update(LAMPORT_ROUTES)
        for model, routes in (CE_ISSUER_ROUTES[issuer] if native else PYTHON_GPU_ROUTES).items():
            if model in gpu:  # gpu: torch.cuda.get_device_name(), e.g. "NVIDIA H100 80GB HBM3"
                self.table.update(routes)
        self.table.update(_load_overrides() if table is None else table)
        self.forced: dict[str, str] = {}

    def choose(self, collective: str, group_size: int, nbytes: int) -> str:
        if collective in self.forced:
            return self.forced[collective]
        for limit, path in self.table.get((collective, group_size), ()):
            if nbytes <= limit:
                return path
        return "nccl"

    def force(self, collective: str, path: str | None) -> None:
        if path is None:
            self.forced.pop(collective, None)
            return
        check_forced(collective, path)
        self.forced[collective] = path


def check_forced(collective: str, path: str) -> None:
    """A forced path must be one the collective can take: any other would silently never run."""
    if collective not in COLLECTIVE_PATHS:
        raise ValueError(f"smddp force path: collective {collective!r} is not one of {tuple(COLLECTIVE_PATHS)}")
    if path not in COLLECTIVE_PATHS[collective]:
        raise ValueError(f"smddp force path: {path!r} is not one of {COLLECTIVE_PATHS[collective]} ({collective})")


def native_route_codes(router: Router, group_size: int) -> list[tuple[int, int, int]]:
    """The router's table for one group size as (collective, largest bytes, path) codes for C++."""
    return [
        (NATIVE_COLL_CODES[coll], limit, NATIVE_PATH_CODES[path])
        for (coll, size), route in sorted(router.table.items())
        if size == group_size and coll in NATIVE_COLL_CODES
        for limit, path in route
    ]


def route_plan(router: Router, group_size: int, flavour: str, lamport_bytes: int = 0) -> str:
    """Everything that sends a call of this group down one path or another, as text the ranks compare
    at init (fast_setup.check_same_routes): the group flavour, its routes for this group size (which
    follow SMDDP_ROUTES, the GPU model and the build), the Lamport region and SMDDP_DISABLE_FAST_PATHS."""
    routes = sorted((coll, route) for (coll, size), route in router.table.items() if size == group_size)
    fast = "off" if os.environ.get("SMDDP_DISABLE_FAST_PATHS", "0") == "1" else "on"
    return json.dumps({"group": flavour, "fast_paths": fast, "lamport_bytes": lamport_bytes, "routes": routes})
