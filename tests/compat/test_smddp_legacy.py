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


ARGS_WORKER = Path(__file__).with_name("smddp_legacy_args_worker.py")


def test_torch_style_arguments_are_ignored_and_the_backend_is_smddp() -> None:
    """AWS's v1 init_process_group(*args, **kwargs) takes no inputs: backend="nccl" (mnist_pt.py) still means smddp."""
    rows, _ = _torchrun()(ARGS_WORKER, 2)
    assert {r: (row["backend"], row["world"], row["sum"]) for r, row in rows.items()} == {
        "0": ("smddp", 2, 3.0), "1": ("smddp", 2, 3.0)}
    assert rows["0"]["warnings"] == []  # backend alone: nothing to warn about
    (warning,) = rows["1"]["warnings"]  # rank/world_size that differ from the job's: said, then ignored
    assert "rank=4 (the job's is 1)" in warning and "world_size=5 (the job's is 2)" in warning


def test_only_the_timeout_reaches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(legacy._td, "is_initialized", lambda: False)
    monkeypatch.setattr(legacy._td, "init_process_group", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    legacy.init_process_group("nccl", init_method="file:///nowhere", timeout=timedelta(seconds=7), store=object())
    legacy.init_process_group()
    assert calls == [((), {"backend": "smddp", "init_method": "env://", "timeout": timedelta(seconds=7)}),
                     ((), {"backend": "smddp", "init_method": "env://"})]
    with pytest.warns(UserWarning, match=r"ignores its arguments.*not timout=\.\.\."):  # ignored, as in SMDDP
        legacy.init_process_group(timout=5)
    assert calls[-1] == ((), {"backend": "smddp", "init_method": "env://"})


def test_a_timeout_torch_cannot_take_is_ignored_as_smddp_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """SMDDP ignored every argument; torch raises on a timeout that is not a timedelta (`timeout=1800`)."""
    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(legacy._td, "is_initialized", lambda: False)
    monkeypatch.setattr(legacy._td, "init_process_group", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    with pytest.warns(UserWarning, match=r"not timeout=1800 \(not a datetime.timedelta\)"):
        legacy.init_process_group(timeout=1800)
    with pytest.warns(UserWarning, match="timeout='30'"):
        legacy.init_process_group("nccl", None, "30")
    assert calls == [((), {"backend": "smddp", "init_method": "env://"})] * 2
