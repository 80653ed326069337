"""SMP v2 on 4 CPU ranks (gloo): TP, HSDP, TP x HSDP, AC and offloading train like one process; DCP reshards."""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

pytestmark = pytest.mark.slow
WORKER = Path(__file__).with_name("v2_worker.py")
LAYOUTS = ["tp2_fsdp2_sp", "hsdp_2x2", "tp2_x_hsdp_rep2", "tp4_ac", "fsdp4_offload", "tp2_ac_fsdp2"]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    rows, _ = torchrun(WORKER, 4, [str(tmp_path_factory.mktemp("v2"))])
    return rows


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_matches_single_process(results: dict[str, dict], layout: str) -> None:
    row = results[layout]
    assert row["losses"] == pytest.approx(row["ref"], rel=1e-4)


def test_offloading_moved_activations(results: dict[str, dict]) -> None:
    assert results["fsdp4_offload"]["offloaded_bytes"] > 0


def test_checkpoint_loads_across_layouts(results: dict[str, dict]) -> None:
    assert results["ckpt_tp2_to_hsdp"]["max_abs_diff"] == 0.0
    assert results["ckpt_tp2_to_hsdp"]["step"] == 3
    assert results["ckpt_tp2_to_single"]["max_abs_diff"] == 0.0


def test_no_gloo_worker_thread_outlives_exit_teardown(results: dict[str, dict]) -> None:
    # One still alive while Python finalizes can abort the rank at exit (see smp/teardown.py).
    assert results["exit_threads"]["gloo_workers"] == 0
