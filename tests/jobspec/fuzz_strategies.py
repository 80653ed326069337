"""Hypothesis strategies shared by the fuzz tests: seed distributions, random values, and mutations of nested dicts."""
from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

SEED_DISTRIBUTIONS: list[dict[str, Any]] = [
    {"smdistributed": {"dataparallel": {"enabled": True}}},
    {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"pipeline_parallel_degree": 1,
                                                                         "placement_strategy": "cluster",
                                                                         "tensor_parallel_degree": 4, "ddp": True}}},
     "mpi": {"enabled": True, "processes_per_host": 8,
             "custom_mpi_options": "--mca btl_vader_single_copy_mechanism none "}},
    {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"microbatches": 4,
                                                                         "pipeline_parallel_degree": 2,
                                                                         "tensor_parallel_degree": 2, "ddp": True}}},
     "mpi": {"enabled": True, "processes_per_host": 8}},
    {"torch_distributed": {"enabled": True},
     "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4,
                                                                         "hybrid_shard_degree": 4}}}},
    {"pytorchddp": {"enabled": True}},
    {"torch_distributed": {"enabled": True}},
    {"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-x FOO=1"}},
    {"parameter_server": {"enabled": True}},
    {"multi_worker_mirrored_strategy": {"enabled": True}},
    {},
]
KEYS = ["enabled", "processes_per_host", "custom_mpi_options", "parameters", "tensor_parallel_degree",
        "hybrid_shard_degree",
        "microbatches", "pipeline", "partitions", "ddp", "placement_strategy", "context_parallel_degree",
        "torch_distributed",
        "mpi", "smdistributed", "dataparallel", "modelparallel", "pytorchddp", "instance_groups", "process_per_host",
        "x"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70), st.integers(), st.floats(allow_nan=True),
    st.text(max_size=8), st.sampled_from(["simple", "cluster", "DPT", "local", "py3", "2.3", "s3://b/k", "\x00",
                                          "../x"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.one_of(st.sampled_from(KEYS),
                                                                                 st.text(max_size=6),
                                                                                 st.integers()), inner, max_size=4)),
                      max_leaves=8)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    return out


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    data = copy.deepcopy(seed)
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(data) if p]
        action = draw(st.sampled_from(["set", "delete", "add", "rename"]))
        if not paths or action == "add":
            target = data
            for part in (draw(st.sampled_from(_paths(data))) if isinstance(data, dict) else ()):
                target = target[part]
            if isinstance(target, dict):
                target[draw(st.sampled_from(KEYS))] = draw(values)
            continue
        path = draw(st.sampled_from(paths))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if action == "delete":
            del parent[path[-1]]
        elif action == "rename":
            parent[draw(st.sampled_from(KEYS))] = parent.pop(path[-1])
        else:
            parent[path[-1]] = draw(values)
    return data
