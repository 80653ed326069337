"""Size routing: which path runs a CUDA collective of a given size on a given group size.

The table was chosen by measurement on 4x H200 (docs/benchmarks.md, `benchmarks/collectives.py`
and its ``--probe`` mode): a fast path is listed only for the sizes where it was at least as fast
as NCCL in those runs; every other size goes to NCCL, so routing never makes smddp meaningfully
slower than NCCL. Group sizes not listed (3, 5-8, multi-node) always use NCCL.

Sizes are the bytes of the collective's *output* for all_gather (nccl-tests' convention), of the
tensor for all_reduce, and of the *input* for reduce_scatter.
``SMDDP_ROUTES`` (JSON, same shape as ``DEFAULT_ROUTES`` with string keys ``"all_gather/4"``)
replaces entries without a code change.
"""
from __future__ import annotations

import json
import os

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
UNBOUNDED = 1 << 62

PATHS = ("nccl", "ce", "one_shot", "two_shot")

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


def _load_overrides() -> dict[tuple[str, int], Route]:
    raw = os.environ.get("SMDDP_ROUTES", "").strip()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        table: dict[tuple[str, int], Route] = {}
        for key, entries in data.items():
            coll, _, size = key.partition("/")
            route = [(int(limit), str(path)) for limit, path in entries]
            for _, path in route:
                if path not in PATHS:
                    raise ValueError(f"path {path!r} is not one of {PATHS}")
            table[(coll, int(size))] = sorted(route)
        return table
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"SMDDP_ROUTES: {exc}. Expected JSON like "
            '{"all_gather/4": [[8388608, "nccl"], [4611686018427387904, "ce"]]}; '
            "unset SMDDP_ROUTES to use the measured defaults."
        ) from exc


class Router:
    """Picks a path per call; ``force`` pins one collective to one path (benchmarks, tests)."""

    def __init__(self, table: dict[tuple[str, int], Route] | None = None) -> None:
        self.table = dict(DEFAULT_ROUTES)
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
        if path not in PATHS:
            raise ValueError(f"smddp force path: {path!r} is not one of {PATHS}")
        self.forced[collective] = path
