"""``torch.sagemaker.moe``: SMP's MoE configuration (``moe_config.MoEConfig``). Expert parallelism itself is
not implemented by this runtime: ``tsm.transform(model, config=MoEConfig(...))`` accepts and ignores it."""
from . import moe_config
from .moe_config import MoEConfig

__all__ = ["MoEConfig", "moe_config"]
