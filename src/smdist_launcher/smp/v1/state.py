"""Process-wide SMP v1 state: config, topology, the DistributedModel and tensor-parallel marks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import V1Config
from .topology import Topology


@dataclass
class V1State:
    cfg: V1Config = field(default_factory=V1Config)
    topology: Topology | None = None
    model: Any = None  # the DistributedModel (SMP v1 supports one per process)
    optimizer: Any = None  # the DistributedOptimizer (save_checkpoint / resume_from_checkpoint use both)
    # id(module) -> pipeline partition, from smp.partition() / smp.set_partition() (manual partitioning)
    partition_marks: dict[int, int] = field(default_factory=dict)
    # a checkpoint read by resume_from_checkpoint before the model existed / was partitioned
    pending_resume: Any = None
    # id(module) of modules marked for tensor parallelism, with their keyword options
    tp_marks: dict[int, dict[str, Any]] = field(default_factory=dict)
    # id(old parameter) -> new parameter, when partitioning or TP replaced parameters after the
    # optimizer was built
    param_remap: dict[int, Any] = field(default_factory=dict)

    def topo(self) -> Topology:
        if self.topology is None:
            raise RuntimeError("smp: call smp.init() first")
        return self.topology


state = V1State()


def reset() -> None:
    state.__dict__.update(V1State().__dict__)
