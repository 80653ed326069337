"""SMDDP's legacy API (``smdistributed.dataparallel.torch.distributed`` / ``.parallel``) on 2 CPU ranks."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.smddp import distributed as legacy

WORKER = Path(__file__).with_name("smddp_legacy_worker.py")


def _torchrun():
    """tests/smp's torchrun launcher (tests/ is not a package, so load it by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("smp_multiprocess",
                                                  Path(__file__).parents[1] / "smp" / "multiprocess.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.torchrun


@pytest.fixture(scope="module")
def row() -> dict:
    rows, _ = _torchrun()(WORKER, 2)
    return rows["0"]


def test_collectives_over_the_smddp_backend(row: dict) -> None:
    assert row["backend"] == "smddp" and row["local_size"] == 2 and row["local_rank"] == 0
    assert (row["sum"], row["avg"], row["max"], row["bcast"]) == (3.0, 1.5, 2.0, 10.0)
    assert row["gather"] == [0.0, 1.0] and row["a2a"] == [0.0, 10.0] and row["reduce"] == 2.0
    assert row["sub_size"] == 2


def test_legacy_ddp_trains_like_one_process_on_the_full_batch(row: dict) -> None:
    assert row["losses"] == pytest.approx(row["ref_losses"], rel=1e-5)


def test_outside_a_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert legacy.is_available() is False
    with pytest.raises(RuntimeError, match="smddprun"):
        legacy.init_process_group()
