"""``tensor_parallel.unit_dp`` (``tsm.shard_model`` where TP covers every rank: mixed precision without FSDP2) on
2 CPU ranks (gloo, tests/smp/unit_dp_worker.py), step by step against FSDP2 over the one-rank mesh: 0.0 is the
same bits for every loss and every unsharded gradient.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

torch = pytest.importorskip("torch")
WORKER = Path(__file__).with_name("unit_dp_worker.py")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    found, _ = torchrun(WORKER, 2, ["zero_between,requires_grad,tied,root_buffer,twice,deepcopy"], timeout=300)
    return found


def test_zero_grad_between_forward_and_backward(rows: dict[str, dict]) -> None:
    # the local tensor kept the previous step's gradient that zero_grad had dropped from the parameter only:
    # the next backward added to it (0.22 off)
    assert rows["zero_between"]["value"] == 0.0, rows["zero_between"]


def test_freezing_and_unfreezing_after_the_first_step(rows: dict[str, dict]) -> None:
    # the local tensor's requires_grad was set once: an unfrozen parameter never got a gradient again, a frozen
    # one kept getting them (and the optimizer updated it)
    assert rows["requires_grad"]["value"] == 0.0, rows["requires_grad"]


def test_tied_embedding_and_head_under_bf16(rows: dict[str, dict]) -> None:
    # one cast per use summed the two bf16 gradients in float32; FSDP2's one unsharded bf16 parameter sums them
    # in bf16 first
    assert rows["tied"]["value"] == 0.0, rows["tied"]


def test_float32_block_inputs_are_cast_like_fsdp2(rows: dict[str, dict]) -> None:
    # only the root cast its inputs: a float32 hidden state reached the bf16 LayerNorm ("mixed dtype" error)
    assert rows["root_buffer"]["value"] == 0.0, rows["root_buffer"]


def test_a_second_shard_model_is_refused(rows: dict[str, dict]) -> None:
    # it was installed again (class SMPUnitDPSMPUnitDPGPT, every parameter cast twice); FSDP2 refuses it too
    assert "already applied" in rows["twice"]["value"], rows["twice"]


def test_the_model_keeps_its_class_name(rows: dict[str, dict]) -> None:
    # it was SMPUnitDP<Name>: HF's save_pretrained writes the class name into config.architectures
    message, classes = rows["twice"]["value"].rsplit(" | class ", 1)
    mine, _, original = classes.partition(" of ")
    assert mine == original, rows["twice"]


def test_a_deep_copy_trains_like_the_model(rows: dict[str, dict]) -> None:
    # the copy's local tensors kept the original's "hooked" mark but not its hook: their gradients never reached
    # the parameters, the copy did not train
    assert rows["deepcopy"]["value"] == 0.0, rows["deepcopy"]
