"""Delayed parameter initialization keeps what a model computes in its constructor (rotary tables)."""
from __future__ import annotations

import torch
from torch import nn

from smdist_launcher.smp.delayed_param import DelayedParamIniter, init_empty_weights, materialize


class Rotary(nn.Module):
    """Like Hugging Face's rotary embedding: a buffer computed in __init__, no reset_parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)
        self.proj = nn.Linear(8, 8)


def test_parameters_are_meta_and_computed_buffers_survive_materialization() -> None:
    expected = Rotary().inv_freq.clone()
    with init_empty_weights():
        model = Rotary()
    assert model.proj.weight.is_meta and not model.inv_freq.is_meta
    materialize(model, "cpu")
    torch.testing.assert_close(model.inv_freq, expected)
    assert not model.proj.weight.is_meta and torch.isfinite(model.proj.weight).all()


def test_fsdp1_param_init_fn_keeps_buffers_and_uses_the_models_init_weights() -> None:
    class Norm(nn.Module):  # no reset_parameters: the model's _init_weights must set it
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(8))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rotary, self.norm = Rotary(), Norm()

        def _init_weights(self, module: nn.Module) -> None:
            if isinstance(module, Norm):
                module.weight.data.fill_(1.0)
            elif isinstance(module, nn.Linear):
                module.reset_parameters()

    expected = Rotary().inv_freq.clone()
    with init_empty_weights():
        model = Model()
    init = DelayedParamIniter(model).get_param_init_fn()
    with DelayedParamIniter(model).validate_params_and_buffers_inited():
        init(model)
    torch.testing.assert_close(model.rotary.inv_freq, expected)
    torch.testing.assert_close(model.norm.weight.detach(), torch.ones(8))
