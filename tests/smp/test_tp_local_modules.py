"""tsm.transform's local tensor parallelism on 2 CPU ranks (gloo, tests/smp/tp_local_modules_worker.py).

Sequence parallelism splits the batch when it divides by the TP degree (no cat/chunk copies), the sequence
otherwise; the partial gradients of a block (norms, row-parallel biases) take one all-reduce, not one per tensor;
both stay exact against one process under FSDP2 and FSDP1 (use_orig_params off/on) with gradient accumulation
(frozen norm parameters too); an activation-checkpoint recompute after a forward of another shape splits as its
own forward did; a forward whose batch and sequence both don't divide (decoding one token) runs unsplit;
a script that compiles each block with ``torch.compile`` gets one graph per block, collectives inside, that trains
the same. With every rank a TP rank (a one-rank data-parallel mesh) ``tsm.shard_model`` runs no FSDP2 hooks and no
``DTensor.from_local`` per gradient (unit_dp, LocalShard) and trains bit for bit like FSDP2 under bf16 mixed
precision, and its DCP checkpoint round-trips; after a forward the bf16 weight casts are not kept (lean_saves),
nor, with ``regather_input`` (off by default: it did not pay on GPUs), the SP norms' gathered outputs.
A Hugging Face-style causal LM called with labels computes its loss over each rank's vocabulary slice (logits not
gathered) with the single-process loss and gradients; the calls it does not cover return what they did. At the
edges: every label ignored (NaN loss, zero gradients, as HF), labels outside the vocabulary (NaN, never a finite
loss), a vocabulary the TP degree does not divide (untied and tied head).
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from .multiprocess import torchrun

torch = pytest.importorskip("torch")
WORKER = Path(__file__).with_name("tp_local_modules_worker.py")
EXACT = ["fsdp2:batch", "fsdp2:seq", "fsdp1:batch", "fsdp1-orig:batch", "fsdp1-orig:frozen"]


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    checks = ["layout", "recompute", "host", "mixed", "lean", "checkpoint", "vploss", "vpedge", *EXACT,
              "fsdp2:compile"]
    found, _ = torchrun(WORKER, 2, [",".join(checks)], timeout=300)
    return found


def test_sequence_parallelism_splits_the_batch_when_it_divides(rows: dict[str, dict]) -> None:
    layout = rows["layout"]
    assert layout["batch2"]["dim"] == 0 and layout["batch1"]["dim"] == 1
    # batch split: the only cats left are the grouped gradients' flattening (one per block) and the LM head's
    # vocabulary gather; the sequence split needs a cat per gather/reduce-scatter (19 with the earlier layout)
    assert layout["batch2"]["cat"] <= layout["blocks"] + 1 < layout["batch1"]["cat"]


def test_partial_gradients_take_one_all_reduce_per_block(rows: dict[str, dict]) -> None:
    layout = rows["layout"]
    # per block one (norm weights and biases together); plus the embedding's forward sum and the LM head's
    # input gradient. One per norm parameter gave 4 per block.
    for batch in ("batch2", "batch1"):
        assert layout[batch]["allreduce"] == layout["blocks"] + 2, layout


@pytest.mark.parametrize("name", EXACT)
def test_two_accumulated_steps_match_one_process(rows: dict[str, dict], name: str) -> None:
    row = rows[name]
    assert row["losses"] == pytest.approx(row["ref_losses"], rel=1e-5)
    assert row["norms"] == pytest.approx(row["ref_norms"], rel=1e-5)


def test_compiled_blocks_train_like_one_process(rows: dict[str, dict]) -> None:
    row = rows["fsdp2:compile"]
    assert row["graphs"] >= 1 and row["graph_breaks"] == 0, row  # one graph for both blocks, collectives inside
    assert row["losses"] == pytest.approx(row["ref_losses"], rel=1e-5)
    assert row["norms"] == pytest.approx(row["ref_norms"], rel=1e-5)



def test_a_recompute_splits_as_its_forward_did(rows: dict[str, dict]) -> None:
    # batch 2 seq 8 and batch 1 seq 16 forwarded before one backward: the first recompute took the second
    # forward's split (reentrant on a middle block: wrong gradients, no error; non-reentrant: checkpoint's
    # metadata error). The third, batch 1 seq 7, divides neither way: it runs unsplit (it raised before).
    row = rows["recompute"]
    assert row["reentrant-middle"] == pytest.approx(0, abs=1e-5), row
    assert row["nonreentrant-all"] == pytest.approx(0, abs=1e-5), row


def test_one_rank_data_parallel_mesh_runs_no_fsdp2_machinery(rows: dict[str, dict]) -> None:
    host = rows["host"]
    # FSDP2 over a one-rank mesh: its pre-forward and post-backward per block and root, and one
    # DTensor.from_local per sharded parameter's gradient (to_local's backward)
    assert host["off"]["fsdp_hooks"] > 0 and host["off"]["from_local"] > 0, host
    assert host["on"] == {"fsdp_hooks": 0, "from_local": 0, "fsdp_module": False, "dtensor_grads": True,
                          "freed": True}, host
    assert host["fsdp2+fast_local"]["from_local"] == 0, host  # LocalShard alone, under FSDP2


def test_unit_dp_mixed_precision_trains_like_fsdp2(rows: dict[str, dict]) -> None:
    row = rows["mixed"]
    assert row["unit_dp_grad_dtypes"] == row["fsdp2_grad_dtypes"] == ["torch.float32"], row
    assert row["unit_dp"] == row["fsdp2"] == row["unit_dp_zeroed"], row  # the same casts and sums: the same bits
    assert row["unit_dp_output_dtype"] == "torch.float32", row  # MixedPrecisionPolicy.output_dtype


def test_gathered_inputs_and_weight_casts_are_not_kept_for_backward(rows: dict[str, dict]) -> None:
    row = rows["lean"]
    assert row["off"]["gathered_alive"] == row["off"]["gathered"] > 0, row  # what the lean saves remove
    assert row["off"]["casts_alive"] == row["off"]["casts"] > 0, row
    assert row["on"]["gathered_alive"] == 0 and row["on"]["casts_alive"] == 0, row
    assert row["on"]["prefetched"] == row["on"]["gathered"] == row["on"]["prefetch_nodes"], row  # early, overlapped
    assert row["ac"]["prefetch_nodes"] == 0, row  # a node there kept each chunk the checkpoint had dropped
    assert row["max_grad_diff"] == 0.0, row  # gathered again / cast again: the same values


def test_unit_dp_checkpoint_round_trips(rows: dict[str, dict]) -> None:
    row = rows["checkpoint"]
    assert row["keys_match"] and row["max_abs_diff"] == 0.0, row  # the single-process model's names and values
    assert row["loaded_next_loss"] == row["next_loss"], row  # optimizer state too


VOCAB_PARALLEL = ["unit_dp", "unit_dp:items", "fsdp2", "fsdp1", "fsdp1-orig", "ac", "tied"]


@pytest.mark.parametrize("mode", VOCAB_PARALLEL)
def test_labels_give_a_vocabulary_parallel_loss_equal_to_one_process(rows: dict[str, dict], mode: str) -> None:
    row = rows["vploss"][mode]
    # each rank kept its half of the 64-token vocabulary (the gathered path returned all 64, a plain tensor)
    assert (row["logits"], row["local_vocab"]) == ("DTensor", 32), row
    assert row["logits_diff"] < 1e-5, row  # full_tensor() gives the full logits
    # ignored tokens and num_items_in_batch included: the loss, every gradient, the loss after one SGD step
    assert row["loss"] == pytest.approx(row["ref_loss"], rel=1e-5), row
    assert row["norm"] == pytest.approx(row["ref_norm"], rel=1e-5), row
    assert row["next"] == pytest.approx(row["ref_next"], rel=1e-5), row
    assert mode.startswith("fsdp1") or (row["grads"] >= 23 and row["grad_diff"] < 1e-5), row


def test_evaluation_with_labels_gets_plain_full_logits(rows: dict[str, dict]) -> None:
    # under no_grad (HF Trainer's prediction_step) the logits were a DTensor: compute_metrics' argmax == labels,
    # torch.cat with plain tensors and .numpy() all raised; the loss is still the vocabulary-parallel one
    row = rows["vploss"]["unit_dp"]
    kind, vocab, loss, diff = row["eval"]
    assert (kind, vocab) == ("Tensor", 64) and diff is not None and diff < 1e-5, row
    assert loss == pytest.approx(row["ref_loss"], rel=1e-5), row


@pytest.mark.parametrize("mode", ["off", "keep", "nosp"])
def test_calls_the_vocabulary_parallel_loss_does_not_cover_are_unchanged(rows: dict[str, dict], mode: str) -> None:
    # TPOptions.vocab_parallel_loss off, logits_to_keep=1, no sequence parallelism (the head is not sharded):
    # gathered logits, the model's own loss
    row = rows["vploss"][mode]
    assert (row["logits"], row["local_vocab"]) == ("Tensor", 64), row
    assert row["loss"] == pytest.approx(row["ref_loss"], rel=1e-5), row
    assert row["next"] == pytest.approx(row["ref_next"], rel=1e-5), row
    if mode == "off":  # and a call without labels returns the same gathered logits with the option on or off
        assert rows["vploss"]["unit_dp"]["plain"] == row["plain"]


def test_all_ignored_labels_give_the_single_process_gradients(rows: dict[str, dict]) -> None:
    # HF's mean over no token is NaN, its gradients zero: a NaN gradient would poison the accumulated micro-batches
    row = rows["vpedge"]["ignored"]
    assert math.isnan(row["loss"]) and row["finite"] and row["grad_diff"] < 1e-5, row


@pytest.mark.parametrize("bad", ["64", "-1"])
def test_labels_outside_the_vocabulary_never_give_a_finite_loss(rows: dict[str, dict], bad: str) -> None:
    row = rows["vpedge"][f"outside{bad}"]  # HF's cross entropy raises; a finite loss would look right
    assert math.isnan(row["loss"]) and row["head_grad_finite"] is False, row


@pytest.mark.parametrize("head", ["untied", "tied"])
def test_a_vocabulary_the_tp_degree_does_not_divide_trains_as_one_process(rows: dict[str, dict], head: str) -> None:
    # 63 over 2 ranks: the untied head's unequal slices gathered (the equal-chunk gather aborted the process), the
    # tied head left replicated with its embedding (sharding it alone untied them); without and with labels
    row = rows["vpedge"][head]
    assert row["losses"] == pytest.approx(row["ref_losses"], rel=1e-5), row


def test_the_loss_keeps_the_forward_signature(rows: dict[str, dict]) -> None:
    # HF's Trainer keeps the dataset columns forward names: (*args, **kwargs) made it drop input_ids
    got, want = rows["vpedge"]["signature"]
    assert got == want and "input_ids" in got, got
