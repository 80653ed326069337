"""SMP's offloading of checkpointed activations (behind PyTorch's offload_wrapper), in one CPU process:
same gradients, one group per checkpointed layer, loads ordered by the horizon, the config switch."""
from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)

from smdist_launcher.smp import offload_wrapper_patch
from smdist_launcher.smp.checkpoint_offload import CheckpointOffloader
from smdist_launcher.smp.config import SMPConfig
from smdist_launcher.smp.reference_models import GPT, Block, GPTConfig, lm_loss
from smdist_launcher.smp.state import reset_state, state

CFG = GPTConfig(dim=32, n_layers=5, n_heads=4, vocab_size=64)


@pytest.fixture(autouse=True)
def one_thread():
    # tiny tensors: intra-op threads only contend on a shared CI machine
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def checkpointed(model: GPT, impl: CheckpointImpl = CheckpointImpl.REENTRANT) -> GPT:
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block),
                                   checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=impl))
    return model


def grads(model: torch.nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    lm_loss(model(tokens[:, :-1]), tokens[:, 1:]).backward()
    return {n.replace("_checkpoint_wrapped_module.", ""): p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("impl", [CheckpointImpl.REENTRANT, CheckpointImpl.NO_REENTRANT])
@pytest.mark.parametrize("horizon", [1, 3])
def test_same_gradients_and_one_group_per_layer(impl: CheckpointImpl, horizon: int) -> None:
    torch.manual_seed(0)
    plain = GPT(CFG)
    model = checkpointed(copy.deepcopy(plain), impl)
    off = CheckpointOffloader(model, horizon=horizon, min_bytes=1)
    tokens = torch.randint(0, 64, (2, 9))
    expected = grads(plain, tokens)

    lm_loss(off.run(model, tokens[:, :-1]), tokens[:, 1:]).backward()
    got = {n.replace("_checkpoint_wrapped_module.", ""): p.grad for n, p in model.named_parameters()}
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)
    groups = off.last_pass.nonempty
    # each checkpointed layer saved its input in a group of its own; what follows the last layer stays resident
    assert len(groups) >= CFG.n_layers + 1
    assert [g.state for g in groups[:CFG.n_layers]] == ["loading"] * CFG.n_layers
    assert groups[-1].state == "resident"


def test_loads_run_horizon_layers_ahead() -> None:
    torch.manual_seed(0)
    model = checkpointed(GPT(CFG))
    off = CheckpointOffloader(model, horizon=2, min_bytes=1)
    order: list[tuple[int, int]] = []  # (group needed, group loaded)
    tokens = torch.randint(0, 64, (2, 9))
    out = off.run(model, tokens[:, :-1])
    p = off.last_pass
    load = p._load

    def record_load(group):
        if group.state == "offloaded":
            order.append(group.index)
        load(group)

    p._load = record_load
    lm_loss(out, tokens[:, 1:]).backward()
    n = len(p.nonempty)
    # backward meets the resident last group first, then each layer; loads stay `horizon` groups ahead
    assert order == list(range(n - 2, -1, -1))


def test_bad_horizon() -> None:
    with pytest.raises(ValueError, match="activation_loading_horizon"):
        CheckpointOffloader(torch.nn.Linear(2, 2), horizon=0)


@pytest.fixture
def smp_state():
    offload_wrapper_patch.install()
    offload_wrapper_patch._warned.clear()
    yield state
    reset_state()
    offload_wrapper_patch._warned.clear()


@pytest.mark.parametrize("enabled", [True, False])
def test_offload_wrapper_follows_the_config(smp_state, enabled: bool, monkeypatch) -> None:
    monkeypatch.setattr(offload_wrapper_patch, "MIN_BYTES", 1)
    smp_state.initialized = True
    smp_state.cfg = SMPConfig(sm_activation_offloading=enabled, activation_loading_horizon=3)
    torch.manual_seed(0)
    plain = GPT(CFG)
    wrapped = offload_wrapper(checkpointed(copy.deepcopy(plain)))
    tokens = torch.randint(0, 64, (2, 9))
    expected = grads(plain, tokens)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = grads(wrapped, tokens)
        grads(wrapped, tokens)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)
    off = wrapped.__dict__.get("_smp_offloader")
    if enabled:
        assert off is not None and off.horizon == 3 and off.stats["saved_bytes"] > 0
        # on CPU: one warning (nothing to offload from), not one per step
        assert sum("no GPU to offload from" in str(w.message) for w in caught) == 1
    else:
        assert off is None  # PyTorch's own save_on_cpu ran


def test_offload_wrapper_without_checkpointing_warns(smp_state) -> None:
    smp_state.initialized = True
    smp_state.cfg = SMPConfig(sm_activation_offloading=True)
    wrapped = offload_wrapper(GPT(CFG))
    with pytest.warns(UserWarning, match="activation-checkpointed"):
        wrapped(torch.randint(0, 64, (2, 8)))
