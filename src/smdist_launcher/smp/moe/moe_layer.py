"""``torch.sagemaker.moe.moe_layer``: the name of SMP's expert-parallel MoE layer.

SMP's ``tsm.transform(model, config=MoEConfig(...))`` swaps a model's sparse MoE blocks for ``MoELayer``; this runtime
does not implement expert parallelism (transform accepts and ignores MoEConfig), so no module is ever a MoELayer.
Scripts still import the class to test modules with it, e.g. AWS's SMP v2 shared-scripts train_utils.py picks the
modules to activation-checkpoint with ``isinstance(submodule, MoELayer)``: that import works and the test is False.
Building one is refused with the reason.
"""
from __future__ import annotations

from typing import Any

from torch import nn


class MoELayer(nn.Module):
    """SMP's expert-parallel mixture-of-experts layer: not implemented by smdist-launcher."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "torch.sagemaker.moe.moe_layer.MoELayer: SMP's expert-parallel MoE layer is not implemented by "
            "smdist-launcher (tsm.transform accepts and ignores MoEConfig, so the model keeps its own MoE blocks, "
            "unsharded); build the model's own MoE module instead")


__all__ = ["MoELayer"]
