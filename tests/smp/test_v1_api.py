"""SMP v1 on 2 CPU ranks: tp_register replacement, send / broadcast / recv_from."""
from __future__ import annotations

from pathlib import Path

import pytest

from .multiprocess import torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def row() -> dict:
    rows, _ = torchrun(Path(__file__).with_name("v1_api_worker.py"), 2)
    return rows["api"]


def test_registered_module_is_replaced_and_split(row: dict) -> None:
    assert row["replaced"] and row["plain_kept"] == "MyBlock"
    assert any("attention.query" in n for n in row["split"]) and any(n.startswith("module.1.") for n in row["split"])


def test_recv_from_matches_send_and_broadcast(row: dict) -> None:
    assert row["got"] == [{"n": 1}, [2]]
