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


@pytest.mark.parametrize(("routes", "names"), [
    ([["all_gather/2", 1]], "expected a JSON object"),  # a list, not an object (was an AttributeError)
    ({"all_gatherr/2": [[1, "ce"]]}, "key 'all_gatherr/2'"),  # unknown collective (was ignored)
    ({"all_gather/0": [[1, "ce"]]}, "key 'all_gather/0'"),
    ({"all_gather/-2": [[1, "ce"]]}, "key 'all_gather/-2'"),
    ({"all_gather/2": [[True, "ce"]]}, r"all_gather/2\[0\]: limit True"),  # was read as 1
    ({"all_gather/2": [["5", "ce"]]}, r"all_gather/2\[0\]: limit '5'"),
    ({"all_gather/2": [[1.7, "ce"]]}, r"all_gather/2\[0\]: limit 1.7"),  # was truncated to 1
    ({"all_gather/2": [[-5, "ce"]]}, r"limit -5 is not a whole number of bytes from 0"),
    ({"all_gather/2": [[1 << 70, "ce"]]}, "limit 1180591620717411303424"),  # C++ holds int64
    ({"all_gather/2": [[100, "ce"], [50, "nccl"]]}, r"\[1\]: limit 50 is not above the previous 100"),  # was sorted
    ({"all_gather/2": [[100, "ce"], [100, "nccl"]]}, r"\[1\]: limit 100 is not above"),
    ({"all_gather/2": [[1, "one_shot"]]}, "path 'one_shot' is not one all_gather can take"),
    ({"all_reduce/2": [[1, "ce"]]}, "path 'ce' is not one all_reduce can take"),
    ({"all_reduce_async/2": [[1, "one_shot"]]}, "path 'one_shot' is not one all_reduce_async can take"),
    ({"reduce_scatter/2": [[1, "two_shot"]]}, "path 'two_shot' is not one reduce_scatter can take"),
    ({"all_reduce/2": [[1 << 62, "lamport"]]}, "Lamport kernel reserves"),  # a 2^64-byte buffer at the first call
    ({"all_gather/2": [[1, "ce", 3]]}, r"all_gather/2\[0\]: expected a \[largest bytes, path\] pair"),
    ({"all_gather/2": 5}, "all_gather/2: expected a list"),
])
def test_hostile_env_routes_are_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch, routes: object,
                                                       names: str) -> None:
    """Every value the native backend or the router would misread (or crash on at the first call, or
    silently never use) fails at init_process_group with the key, the value and what is allowed."""
    monkeypatch.setenv("SMDDP_ROUTES", json.dumps(routes))
    with pytest.raises(ValueError, match=f"SMDDP_ROUTES: .*{names}.*unset SMDDP_ROUTES"):
        Router(native=True)


def test_env_routes_every_collective_can_take_are_kept_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = {"all_reduce_async/2": [[32 * MiB, "lamport"]], "all_reduce/4": [[0, "nccl"], [2 * MiB, "one_shot"],
                                                                              [4 * MiB, "two_shot"]],
              "all_gather/8": [[64 * MiB, "nccl"], [1 << 62, "ce"]], "reduce_scatter/2": []}
    monkeypatch.setenv("SMDDP_ROUTES", json.dumps(routes))
    table = Router(native=True).table
    assert table[("all_reduce_async", 2)] == [(32 * MiB, "lamport")]
    assert table[("all_reduce", 4)] == [(0, "nccl"), (2 * MiB, "one_shot"), (4 * MiB, "two_shot")]
    assert table[("all_gather", 8)] == [(64 * MiB, "nccl"), (1 << 62, "ce")]
    assert table[("reduce_scatter", 2)] == []


@pytest.mark.parametrize(("collective", "path"), [("all_gather", "one_shot"), ("all_reduce", "ce"),
                                                  ("all_gatherr", "ce"), ("reduce_scatter", "ce"),
                                                  ("all_reduce_async", "two_shot")])
def test_forcing_a_path_the_collective_cannot_take_is_refused(collective: str, path: str) -> None:
    """Was accepted and silently never ran (the call went to NCCL while the caller measured "smddp:<path>")."""
    from smdist_launcher.smddp.native_backend import force_native_path

    with pytest.raises(ValueError, match="smddp force path: .*is not one of"):
        Router(table={}).force(collective, path)
    with pytest.raises(ValueError, match="smddp force path: .*is not one of"):
        force_native_path(None, collective, path)  # checked before the backend is touched


def test_each_group_flavour_takes_its_own_measured_h100_table() -> None:
    # The Python group stages in one part: its copy engines lose to NCCL from 256 MiB on H100 (0.92x at 1 GiB),
    # where the H200 table it used to get on every GPU sends 1 GiB to them.
    h100 = "NVIDIA H100 80GB HBM3"
    python, native = Router(table={}, gpu=h100), Router(table={}, native=True, gpu=h100)
    assert [python.choose("all_gather", 2, n) for n in (32 * MiB, 128 * MiB, 256 * MiB, 1 * GiB)] == \
        ["nccl", "ce", "nccl", "nccl"]
    assert [native.choose("all_gather", 2, n) for n in (32 * MiB, 256 * MiB, 512 * MiB, 1 * GiB, 2 * GiB)] == \
        ["ce", "ce", "ce", "ce", "nccl"]
    assert Router(table={}, gpu="NVIDIA H200").choose("all_gather", 2, 1 * GiB) == "ce"
