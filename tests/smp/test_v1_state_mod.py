"""SMP v1's state_mod.state, utils.get_distribution_axis, the GPT-2 translators and smp.init's static_mode, on 2 CPU
ranks with tensor_parallel_degree 2 (v1_state_mod_worker.py), through AWS's import paths."""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def row() -> dict:
    rows, _ = torchrun(Path(__file__).with_name("v1_state_mod_worker.py"), 2)
    return rows["state_mod"]


def test_init_accepts_static_mode_with_one_warning(row: dict) -> None:
    assert len(row["static_warnings"]) == 1 and "no effect" in row["static_warnings"][0]


def test_param_name_to_index_tp_group_has_every_tp_rank(row: dict) -> None:
    assert row["tp_size"] == 2 and row["same_names"] and row["num_params"] == 17
    assert row["index_matches"]  # the indices are those of optimizer.state_dict()["state"]
    assert row["inverse"]  # param_index_to_name_tp_group inverts it, rank by rank
    assert row["cached"]  # gathered once, as SMP does


def test_get_distribution_axis_names_the_split_dimension(row: dict) -> None:
    axes = row["axes"]
    assert axes["transformer.h.0.attn.c_attn.weight"] == 0 and axes["transformer.h.0.attn.c_attn.bias"] == 0
    assert axes["lm_head.weight"] == 0
    assert axes["transformer.wte.weight"] == 1  # embeddings split their embedding dim
    assert axes["transformer.h.1.ln_1.weight"] is None and axes["transformer.ln_f.bias"] is None
    assert row["merged_ok"] and row["sliced_ok"]  # merging / slicing along it gives the full tensor / the shard


def test_gpt2_translators_follow_the_models_layout(row: dict) -> None:
    assert row["loaded"]  # translate_hf_state_dict_to_smdistributed's output loads into the Hugging Face layout
    assert row["back_keys"]  # translate_state_dict_to_hf_gpt2 keeps Hugging Face keys (attn.bias for max_seq_len)
