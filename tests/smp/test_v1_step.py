"""@smp.step's microbatch splitting, StepOutput, and pipeline cut points (pure)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from smdist_launcher.smp.v1.pipeline import balanced_split_points
from smdist_launcher.smp.v1.step import StepOutput, split_arguments


def body(model, data, target, scale=1.0):
    return data


def test_split_arguments_by_axis_and_non_split() -> None:
    data, target, mask = torch.arange(8).reshape(4, 2), torch.arange(4), torch.ones(3)
    mbs = split_arguments(body, ("m", data, target), {"scale": mask}, 2, non_split=("scale",),
                          axes={"data": 1})
    assert len(mbs) == 2
    (args0, _), (args1, _) = mbs
    assert args0[0] == "m" and torch.equal(args0[1], data[:, :1]) and torch.equal(args1[2], target[2:])
    assert args0[3] is mask  # bound as positional, not split


def test_split_needs_divisible_batch() -> None:
    with pytest.raises(ValueError, match="not divisible by microbatches=3"):
        split_arguments(body, (None, torch.zeros(4), torch.zeros(4)), {}, 3, (), {})


def test_step_output_reductions() -> None:
    out = StepOutput([torch.tensor(1.0), torch.tensor(3.0)])
    assert out.reduce_mean().item() == 2.0 and out.reduce_sum().item() == 4.0
    assert out.concat().tolist() == [1.0, 3.0] and out.stack().shape == (2,)
    batches = StepOutput([torch.zeros(2, 5), torch.ones(3, 5)])
    assert batches.concat().shape == (5, 5) and len(batches) == 2


def test_balanced_split_points() -> None:
    model = nn.Sequential(nn.Linear(100, 100), nn.Linear(100, 1), nn.Linear(1, 1), nn.Linear(1, 100))
    assert balanced_split_points(model, 2) == ["1"]
    assert balanced_split_points(model, 4) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="only 4 top-level children"):
        balanced_split_points(model, 5)


class Sliceable:
    def __init__(self, data: torch.Tensor) -> None:
        self.data = data

    def smp_slice(self, num_mb: int, mb: int, axis: int) -> Sliceable:
        size = self.data.shape[axis] // num_mb
        return Sliceable(self.data.narrow(axis, mb * size, size))


def test_split_containers_and_smp_slice_objects() -> None:
    def fn(batch, custom, flag):
        return batch

    mbs = split_arguments(fn, ({"x": torch.arange(4), "meta": "keep"}, Sliceable(torch.arange(6)), True), {}, 2, (), {})
    (a0, _), (a1, _) = mbs
    assert torch.equal(a1[0]["x"], torch.tensor([2, 3])) and a0[0]["meta"] == "keep"
    assert torch.equal(a1[1].data, torch.tensor([3, 4, 5])) and a0[2] is True
    with pytest.raises(NotImplementedError, match="use StepOutput.concat"):
        StepOutput([torch.zeros(1)]).merge()
