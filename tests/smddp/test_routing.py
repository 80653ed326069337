"""Size routing: measured table, overrides, forced paths."""
from __future__ import annotations

import json

import pytest

from smdist_launcher.smddp.routing import DEFAULT_ROUTES, GiB, MiB, Router


def test_every_default_route_is_ascending_and_ends_unbounded() -> None:
    for key, route in DEFAULT_ROUTES.items():
        limits = [limit for limit, _ in route]
        assert limits == sorted(limits), key
        assert route[-1][0] >= 1 << 62, f"{key}: sizes past the last limit would have no route"


def test_unknown_collective_or_group_size_goes_to_nccl() -> None:
    router = Router(table={})
    assert router.choose("reduce_scatter", 4, 1 * GiB) == "nccl"
    assert router.choose("all_gather", 3, 1 * GiB) == "nccl"


def test_first_matching_limit_wins() -> None:
    router = Router(table={("all_gather", 2): [(64 * MiB, "nccl"), (1 << 62, "ce")]})
    assert router.choose("all_gather", 2, 64 * MiB) == "nccl"
    assert router.choose("all_gather", 2, 64 * MiB + 1) == "ce"


def test_force_pins_and_releases_a_collective() -> None:
    router = Router(table={})
    router.force("all_reduce", "one_shot")
    assert router.choose("all_reduce", 4, 1 * GiB) == "one_shot"
    router.force("all_reduce", None)
    assert router.choose("all_reduce", 4, 1 * GiB) == "nccl"
    with pytest.raises(ValueError, match="not one of"):
        router.force("all_reduce", "warp_speed")


def test_env_override_replaces_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDDP_ROUTES", json.dumps({"all_gather/4": [[1 << 62, "ce"]]}))
    assert Router().choose("all_gather", 4, 1) == "ce"


@pytest.mark.parametrize("raw", ["{not json", '{"all_gather/4": [[1, "teleport"]]}', '{"all_gather": [[1, "ce"]]}'])
def test_bad_env_override_names_the_variable_and_the_fix(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("SMDDP_ROUTES", raw)
    with pytest.raises(ValueError, match="SMDDP_ROUTES.*unset SMDDP_ROUTES"):
        Router()
