"""SMP v2 config: defaults, sources and checks (pure)."""
from __future__ import annotations

import json

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.smp.config import KEY_PATH, SMPConfig, check_against_world, load_config, parse_config


def test_defaults_follow_smp() -> None:
    cfg = load_config(environ={})
    assert cfg == SMPConfig()
    assert (cfg.hybrid_shard_degree, cfg.sm_activation_offloading, cfg.activation_loading_horizon) == (0, True, 2)


def test_sources_in_order() -> None:
    env = {"SM_HP_MP_PARAMETERS": json.dumps({"tensor_parallel_degree": 2}),
           "SM_HPS": json.dumps({"mp_parameters": {"tensor_parallel_degree": 8}})}
    assert load_config(environ=env).tensor_parallel_degree == 2
    assert load_config(environ={"SM_HPS": env["SM_HPS"]}).tensor_parallel_degree == 8
    assert load_config(environ={**env, "SMP_CONFIG": '{"tensor_parallel_degree": 4}'}).tensor_parallel_degree == 4
    assert load_config({"tensor_parallel_degree": 1}, environ=env).tensor_parallel_degree == 1


def test_config_file(tmp_path) -> None:
    path = tmp_path / "smp.json"
    path.write_text('{"hybrid_shard_degree": 2, "random_seed": 7}')
    cfg = load_config(str(path), environ={})
    assert (cfg.hybrid_shard_degree, cfg.random_seed) == (2, 7)


def test_v1_keys_are_ignored_and_strings_coerced() -> None:
    cfg = parse_config({"pipeline_parallel_degree": 2, "ddp": True, "tensor_parallel_degree": "2",
                        "sm_activation_offloading": "false"})
    assert cfg.tensor_parallel_degree == 2 and cfg.sm_activation_offloading is False


def test_errors_name_the_key_path_and_value() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_config({"tensor_parallel_degre": 2, "hybrid_shard_degree": -1, "allow_empty_shards": "maybe"})
    paths = {e.path for e in exc.value.errors}
    assert paths == {f"{KEY_PATH}.tensor_parallel_degre", f"{KEY_PATH}.hybrid_shard_degree",
                     f"{KEY_PATH}.allow_empty_shards"}
    assert "allowed:" in str(exc.value)


def test_bad_json_source() -> None:
    with pytest.raises(ValidationError, match=r"\$SMP_CONFIG: is not valid JSON"):
        load_config(environ={"SMP_CONFIG": "{tensor_parallel_degree: 2"})


@pytest.mark.parametrize("params, world, key", [
    ({"tensor_parallel_degree": 3}, 8, "tensor_parallel_degree"),
    ({"tensor_parallel_degree": 2, "hybrid_shard_degree": 3}, 8, "hybrid_shard_degree"),
    ({"hybrid_shard_degree": 16}, 8, "hybrid_shard_degree"),
    ({"expert_parallel_degree": 2, "tensor_parallel_degree": 2}, 8, "expert_parallel_degree"),
    ({"context_parallel_degree": 4, "hybrid_shard_degree": 2}, 8, "context_parallel_degree"),
])
def test_world_checks(params: dict, world: int, key: str) -> None:
    with pytest.raises(ValidationError) as exc:
        check_against_world(parse_config(params), world)
    assert exc.value.errors[0].path.endswith(key)


def test_valid_layouts_pass() -> None:
    check_against_world(parse_config({"tensor_parallel_degree": 2, "hybrid_shard_degree": 2}), 8)
    check_against_world(parse_config({"hybrid_shard_degree": 1}), 4)
