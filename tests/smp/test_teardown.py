"""smp.teardown: at a normal exit, drop what keeps process groups alive (in-process, no process group)."""
from __future__ import annotations

import sys

import pytest

from smdist_launcher.smp import teardown


class Holder:
    def __init__(self) -> None:
        self.group: object | None = object()


@pytest.fixture(autouse=True)
def fresh_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teardown, "_releases", [])
    monkeypatch.setattr(teardown, "_registered", True)  # no real atexit hook from these tests


def forget(holder: Holder) -> None:
    holder.group = None


def test_release_runs_for_live_owners_and_skips_collected_ones() -> None:
    live, gone = Holder(), Holder()
    teardown.release_at_exit(live, forget)
    teardown.release_at_exit(gone, forget)
    del gone
    teardown.release_process_groups()
    assert live.group is None and teardown._releases == []


def test_nothing_is_released_after_an_uncaught_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "last_value", RuntimeError("boom"), raising=False)
    holder = Holder()
    teardown.release_at_exit(holder, forget)
    teardown.release_process_groups()
    assert holder.group is not None


def test_track_mesh_clears_the_mesh_group_registry() -> None:
    class Mesh:
        def __init__(self) -> None:
            self._pg_registry = {"group_1": object()}

    mesh = Mesh()
    teardown.track_mesh(mesh)
    teardown.release_process_groups()
    assert mesh._pg_registry == {}
