"""SMP v2 local checkpoints (state_dict_utils) on 4 CPU ranks: resuming reproduces the uninterrupted run."""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

pytestmark = pytest.mark.slow
WORKER = Path(__file__).with_name("v2_local_checkpoint_worker.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    rows, _ = torchrun(WORKER, 4, [str(tmp_path_factory.mktemp("local-ckpt"))])
    return rows


@pytest.mark.parametrize("kind", ["fsdp1", "fsdp2"])
def test_resume_from_a_local_checkpoint_is_exact(results: dict[str, dict], kind: str) -> None:
    row = results[kind]
    assert row["resumed"] == row["uninterrupted"], row     # same shards, same optimizer moments, same lr
    assert row["lr"] == 0.02                               # param groups came back with the checkpoint
    assert ".metadata" in row["files"]


def test_no_gloo_worker_thread_outlives_exit(results: dict[str, dict]) -> None:
    # on GPUs async_save adds gloo twins of NCCL groups: teardown joins their threads too (1x H100 run, 2026-11-23)
    assert results["exit_threads"]["gloo_workers"] == 0
