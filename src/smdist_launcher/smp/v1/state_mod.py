"""``smdistributed.modelparallel.torch.state_mod``: SMP's process-wide ``state`` object.

Scripts (AWS's GPT-2 fp16 helpers) read ``state.param_name_to_index_tp_group`` /
``state.param_index_to_name_tp_group``, ``state.model``, ``state.optimizer`` and ``state.cfg`` from it.
"""
from .state import V1State, state

__all__ = ["V1State", "state"]
