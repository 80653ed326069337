"""Host names and rank layout: hosts algo-1..N, the first host is the master, global ranks contiguous per host."""
from __future__ import annotations

HOST_PREFIX = "algo-"


def host_names(count: int) -> list[str]:
    """``algo-1 .. algo-N`` in numeric order (SageMaker's resourceconfig lists them sorted as strings; the plan fixes
    one order and every launcher derives node ranks from it)."""
    return [f"{HOST_PREFIX}{i}" for i in range(1, count + 1)]


def host_ranks(host_index: int, processes_per_host: int) -> list[int]:
    """Global ranks of host ``host_index`` (0-based): ``[i*P, (i+1)*P)``, as torchrun node ranks and mpirun ``-map-by slot`` give them."""
    start = host_index * processes_per_host
    return list(range(start, start + processes_per_host))
