"""Host names and rank layout: hosts algo-1..N, the first host is the master, global ranks contiguous per host.

Instance groups take consecutive hosts in the order they are given (data: algo-1, train: algo-2..3); the master is
the first host of the distribution's group, so it is not always algo-1 (as on SageMaker)."""
from __future__ import annotations

from ..jobspec.resolved import ResolvedInstanceGroup

HOST_PREFIX = "algo-"


def host_names(count: int) -> list[str]:
    """``algo-1 .. algo-N`` in numeric order (SageMaker's resourceconfig lists them sorted as strings; the plan fixes
    one order and every launcher derives node ranks from it)."""
    return [f"{HOST_PREFIX}{i}" for i in range(1, count + 1)]


def host_ranks(host_index: int, processes_per_host: int) -> list[int]:
    """Global ranks of host ``host_index`` (0-based): ``[i*P, (i+1)*P)``, as torchrun node ranks and mpirun
    ``-map-by slot`` give them."""
    start = host_index * processes_per_host
    return list(range(start, start + processes_per_host))


def group_hosts(groups: list[ResolvedInstanceGroup]) -> list[tuple[ResolvedInstanceGroup, list[str]]]:
    """Each instance group with its hosts, numbered across groups in order."""
    out, start = [], 1
    for group in groups:
        out.append((group, [f"{HOST_PREFIX}{i}" for i in range(start, start + group.instance_count)]))
        start += group.instance_count
    return out
