"""``torch.sagemaker.moe.moe_config.MoEConfig``: the options SMP's MoE scripts pass to ``tsm.transform``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MoEConfig:
    smp_moe: bool = True
    random_seed: int = 12345
    moe_load_balancing: str = "sinkhorn"
    global_token_shuffle: bool = False
    moe_all_to_all_dispatcher: bool = True
    moe_aux_loss_coeff: float = 0.001
    moe_z_loss_coeff: float = 0.001
    use_cpu_initialization: bool = False

    def __post_init__(self) -> None:
        allowed = ("sinkhorn", "balanced", "aux_loss", "none")
        if self.moe_load_balancing not in allowed:
            raise ValueError(f"MoEConfig.moe_load_balancing: {self.moe_load_balancing!r} is not one of {allowed}")
