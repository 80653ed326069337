"""Activation offloading bookkeeping in one CPU process: same gradients, horizon-ordered loading."""
from __future__ import annotations

import copy

import pytest
import torch

from smdist_launcher.smp.activation_offload import apply_activation_offloading
from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss


def grads(model: GPT, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    lm_loss(model(tokens[:, :-1]), tokens[:, 1:]).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("fraction, horizon", [(1.0, 1), (0.5, 2), (1.0, 3)])
def test_offloaded_training_has_identical_gradients(fraction: float, horizon: int) -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(dim=32, n_layers=5, n_heads=4, vocab_size=64))
    offloaded = copy.deepcopy(model)
    tokens = torch.randint(0, 64, (2, 9))
    offloader = apply_activation_offloading(offloaded, horizon=horizon, offload_fraction=fraction, min_bytes=0)
    expected, got = grads(model, tokens), grads(offloaded, tokens)
    assert offloader.offloaded_blocks == set(range(round((5 - horizon) * fraction)))
    assert offloader.stats["offloaded_bytes"] > 0
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)
    offloader.remove()


def test_load_order_follows_the_horizon() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(dim=16, n_layers=6, n_heads=2, vocab_size=32))
    offloader = apply_activation_offloading(model, horizon=2, min_bytes=0)
    order: list[int] = []
    original = offloader._load_block

    def record(index: int) -> None:
        if index in offloader.offloaded_blocks and not offloader._states[index].loading:
            order.append(index)
        original(index)

    offloader._load_block = record  # type: ignore[method-assign]
    tokens = torch.randint(0, 32, (2, 5))
    lm_loss(model(tokens[:, :-1]), tokens[:, 1:]).backward()
    # blocks 4, 5 stay on the device; backward loads 3 while block 4 runs, then one ahead each time
    assert order == [3, 2, 1, 0]


def test_bad_arguments() -> None:
    model = GPT(GPTConfig(dim=8, n_layers=2, n_heads=2, vocab_size=16))
    with pytest.raises(ValueError, match="horizon"):
        apply_activation_offloading(model, horizon=0)
    with pytest.raises(ValueError, match="offload_fraction"):
        apply_activation_offloading(model, offload_fraction=1.5)
    with pytest.raises(ValueError, match="found no blocks"):
        apply_activation_offloading(torch.nn.Linear(2, 2))
