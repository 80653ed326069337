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
    # (optimizer, partitioned) the tp-group name/index maps were gathered for, and the maps
    _tp_maps_key: Any = None
    _tp_name_to_index: list[dict[str, int]] | None = None
    _tp_index_to_name: list[dict[int, str]] | None = None

    def topo(self) -> Topology:
        if self.topology is None:
            raise RuntimeError("smp: call smp.init() first")
        return self.topology

    def _tp_maps(self) -> tuple[list[dict[str, int]], list[dict[int, str]]]:
        """Every tp rank's ``optimizer.param_name_to_index()``, gathered once (a collective over the tp group, so
        all tp ranks must read it the first time); gathered again after the optimizer or partitioning changed."""
        if self.optimizer is None:
            raise RuntimeError("smp: state.param_name_to_index_tp_group needs an smp.DistributedOptimizer; create "
                               "it first")
        key = (id(self.optimizer), getattr(self.model, "partitioned", False))
        if self._tp_name_to_index is None or self._tp_maps_key != key:
            import torch.distributed as dist  # here: the state is read before torch.distributed is needed

            tp = self.topo().group("tp")  # comm's TP_GROUP (comm reads this state: gathered here, without it)
            gathered: list[Any] = [None] * dist.get_world_size(tp)
            dist.all_gather_object(gathered, self.optimizer.param_name_to_index(), group=tp)
            self._tp_name_to_index = gathered
            self._tp_index_to_name = [{index: name for name, index in m.items()} for m in gathered]
            self._tp_maps_key = key
        assert self._tp_index_to_name is not None
        return self._tp_name_to_index, self._tp_index_to_name

    @property
    def param_name_to_index_tp_group(self) -> list[dict[str, int]]:
        """Item r: parameter name -> optimizer state index on tp rank r (SMP's state_mod attribute)."""
        return self._tp_maps()[0]

    @property
    def param_index_to_name_tp_group(self) -> list[dict[int, str]]:
        """Item r: optimizer state index -> parameter name on tp rank r."""
        return self._tp_maps()[1]


state = V1State()


def reset() -> None:
    state.__dict__.update(V1State().__dict__)
