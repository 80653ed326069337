"""``torch.sagemaker.moe``: SMP's MoE configuration (``moe_config.MoEConfig``). Expert parallelism itself is
not implemented by this runtime: ``tsm.transform(model, config=MoEConfig(...))`` accepts and ignores it, and
``moe_layer.MoELayer`` exists for scripts' isinstance tests only."""
from . import moe_config, moe_layer
from .moe_config import MoEConfig

__all__ = ["MoEConfig", "moe_config", "moe_layer"]
