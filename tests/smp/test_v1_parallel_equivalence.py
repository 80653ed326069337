"""SMP v1 on 4 CPU ranks (gloo): TP, PP (simple / interleaved), TP+PP train like one process; smp.save/load."""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

pytestmark = pytest.mark.slow
WORKER = Path(__file__).with_name("v1_worker.py")
LAYOUTS = ["tp2_ddp_no_step", "tp4_mb2", "pp2_simple_mb2", "pp2_interleaved_mb4", "pp2_tp2_mb4_spread"]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    rows, _ = torchrun(WORKER, 4, [str(tmp_path_factory.mktemp("v1"))])
    return rows


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_matches_single_process(results: dict[str, dict], layout: str) -> None:
    row = results[layout]
    assert row["losses"] == pytest.approx(row["ref"], rel=1e-5)


def test_partial_checkpoint_round_trip(results: dict[str, dict]) -> None:
    assert results["ckpt_partial_roundtrip"]["max_abs_diff"] == 0.0


def test_full_checkpoint_loads_into_tp_and_single_process(results: dict[str, dict]) -> None:
    assert results["ckpt_full_into_tp"]["max_abs_diff"] == 0.0
    row = results["ckpt_full_into_single"]
    assert row["loss"] == pytest.approx(row["tp_loss"], rel=1e-5)


def test_group_sizes_for_spread_placement(results: dict[str, dict]) -> None:
    row = results["groups"]
    assert row["sizes"] == {"WORLD": 4, "MP_GROUP": 4, "DP_GROUP": 2, "TP_GROUP": 2, "PP_GROUP": 2, "RDP_GROUP": 1}
    assert row["ranks"] == [2, 2, 2, 1, 4] and row["mp_members"] == [0, 1, 2, 3]


def test_no_gloo_worker_thread_outlives_exit_teardown(results: dict[str, dict]) -> None:
    # One still alive while Python finalizes can abort the rank at exit (see smp/teardown.py).
    assert results["exit_threads"]["gloo_workers"] == 0
