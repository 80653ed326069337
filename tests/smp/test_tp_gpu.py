"""tsm.transform's TP 2 on 2 GPUs (NCCL; tests/smp/tp_gpu_worker.py): each TPOptions switch trains like one process.

fp32 (TF32 off): the defaults (unit_dp, LocalShard, weight recasts), the defaults with async TP (symmetric-memory
fused row projections, CUDA only: the CPU suite cannot see it) and the input re-gather, and everything off all
match one process; bf16: the first two match the all-off run (FSDP2 over the one-rank mesh) within bf16 rounding.
Passed on 2x H100 (torch 2.11, 2026-11-27) with async TP and the re-gather as the defaults of that run.
A causal LM called with labels: the vocabulary-parallel loss (logits left sharded) equals one process's in fp32
(the reference GPT as a Hugging Face-style LM; transformers' GPT-NeoX where installed) and a bf16 step's peak
memory drops by more than the full float32 logits with it on.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

torch = pytest.importorskip("torch")
WORKER = Path(__file__).with_name("tp_gpu_worker.py")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 CUDA GPUs, found {torch.cuda.device_count()}")
    found, _ = torchrun(WORKER, 2, [], timeout=300)
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["default", "async_regather", "all_off"])
def test_fp32_matches_one_process(rows: dict[str, dict], name: str) -> None:
    row = rows[f"fp32:{name}"]
    assert row["losses"] == pytest.approx(row["ref_losses"], rel=1e-4), row
    assert row["norms"] == pytest.approx(row["ref_norms"], rel=1e-4), row


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["default", "async_regather"])
def test_bf16_matches_the_fsdp2_path(rows: dict[str, dict], name: str) -> None:
    row, off = rows[f"bf16:{name}"], rows["bf16:all_off"]
    assert row["losses"] == pytest.approx(off["losses"], rel=2e-2), (row, off)
    assert row["norms"] == pytest.approx(off["norms"], rel=5e-2), (row, off)


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["gpt", "neox"])
def test_vocabulary_parallel_loss_matches_one_process(rows: dict[str, dict], model: str) -> None:
    row = rows.get(f"vploss:{model}")
    if row is None:
        pytest.skip("needs transformers (GPU image)")
    assert (row["logits"], row["local_vocab"]) == ("DTensor", row["vocab"] // 2), row  # not gathered
    assert row["loss"] == pytest.approx(row["ref_loss"], rel=1e-4), row
    assert row["norm"] == pytest.approx(row["ref_norm"], rel=1e-4), row


@pytest.mark.gpu
def test_vocabulary_parallel_loss_lowers_the_tp2_peak(rows: dict[str, dict]) -> None:
    row = rows["vploss:memory"]
    assert row["on_loss"] == pytest.approx(row["off_loss"], rel=1e-2), row  # bf16 logits either way
    # gathered: the full logits, their float32 upcast, log-softmax and gradient on every TP rank
    assert row["on_peak_mib"] < row["off_peak_mib"] - row["logits_fp32_mib"], row
