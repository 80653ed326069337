"""SMP v1 pieces that need no process group: manual partitions, activation checkpointing, GradScaler, delayed init."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from smdist_launcher.errors import ValidationError
from smdist_launcher.smp.v1 import amp, notices
from smdist_launcher.smp.v1.activation_checkpointing import set_activation_checkpointing
from smdist_launcher.smp.v1.config import parse_v1
from smdist_launcher.smp.v1.model_creation import model_creation
from smdist_launcher.smp.v1.partition import manual_split_points, partition, set_partition
from smdist_launcher.smp.v1.state import reset, state


@pytest.fixture(autouse=True)
def fresh_state():
    reset()
    yield
    reset()


class Four(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(2, 2)
        with partition(1):
            self.b = nn.Linear(2, 2)
            with partition(2):
                self.c = nn.Linear(2, 2)
        self.d = nn.Linear(2, 2)


def test_manual_partitions_from_contexts_and_set_partition() -> None:
    state.cfg = parse_v1({"pipeline_parallel_degree": 3, "auto_partition": False})
    model = Four()
    with pytest.raises(ValidationError, match="non-decreasing order"):
        manual_split_points(model)  # d falls back to default_partition 0 after c in partition 2
    set_partition(model.d, 2)
    assert manual_split_points(model) == ["b", "c"]
    state.cfg = parse_v1({"pipeline_parallel_degree": 4, "auto_partition": False})
    with pytest.raises(ValidationError, match=r"partitions \[3\] have no top-level child"):
        manual_split_points(model)


def test_auto_partition_ignores_marks_with_one_warning() -> None:
    notices._said.discard("partition-auto")
    state.cfg = parse_v1({"pipeline_parallel_degree": 2})
    with pytest.warns(UserWarning, match="ignored because auto_partition is true"):
        assert manual_split_points(Four()) is None


@pytest.mark.parametrize("strategy", ["each", "group_2", "contiguous"])
def test_activation_checkpointing_keeps_values_and_gradients(strategy: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    twin = copy.deepcopy(model)
    set_activation_checkpointing(twin, strategy=strategy)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    twin(x).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)
    with pytest.raises(ValueError, match="strategy='group_x'"):
        set_activation_checkpointing(nn.Sequential(nn.Linear(1, 1)), strategy="group_x")
    with pytest.raises(ValueError, match="apply only to nn.Sequential"):
        set_activation_checkpointing(nn.Linear(1, 1), strategy="group_2")


def test_grad_scaler_scales_skips_on_inf_and_backs_off() -> None:
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=1)
    x = torch.randn(4, 3)
    loss = F.mse_loss(model(x), torch.zeros(4, 1))
    scaler.scale(loss).backward()
    grads = [p.grad.clone() / 8.0 for p in model.parameters()]
    before = [p.detach().clone() for p in model.parameters()]
    scaler.step(opt)
    scaler.update()
    for b, g, p in zip(before, grads, model.parameters(), strict=True):
        assert torch.allclose(p, b - 0.1 * g)
    assert scaler.get_scale() == 16.0
    opt.zero_grad()
    model.weight.grad = torch.full_like(model.weight, float("inf"))
    model.bias.grad = torch.zeros_like(model.bias)
    kept = model.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(model.weight, kept) and scaler.get_scale() == 8.0
    restored = amp.GradScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == 8.0


def test_model_creation_dtype_and_delayed_init() -> None:
    with model_creation(dtype=torch.float64, delayed_param_initialization=True):
        net = nn.Linear(2, 2)
    assert net.weight.is_meta and net.weight.dtype == torch.float64 and torch.get_default_dtype() == torch.float32
