"""SMP v1 mp_parameters: defaults, alias, checks (pure)."""
from __future__ import annotations

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.smp.config import KEY_PATH
from smdist_launcher.smp.v1.config import V1Config, check_v1_world, parse_v1


def test_defaults_and_alias() -> None:
    assert parse_v1({}) == V1Config()
    cfg = parse_v1({"partitions": 2, "microbatches": 4, "pipeline": "simple", "placement_strategy": "spread"})
    assert (cfg.pipeline_parallel_degree, cfg.microbatches, cfg.pipeline) == (2, 4, "simple")
    assert V1Config().activation_loading_horizon == 4 and V1Config().pipeline == "interleaved"


def test_seed_parameters_parse() -> None:
    cfg = parse_v1({"microbatches": 4, "pipeline_parallel_degree": 2, "placement_strategy": "cluster",
                    "tensor_parallel_degree": 2, "ddp": True})
    check_v1_world(cfg, 8)


@pytest.mark.parametrize("params, key", [
    ({"tensor_parallel_degree": 2}, "ddp"),
    ({"pipeline": "1f1b"}, "pipeline"),
    ({"microbatches": 0}, "microbatches"),
    ({"partitions": 2, "pipeline_parallel_degree": 4}, "partitions"),
    ({"pipline_parallel_degree": 2}, "pipline_parallel_degree"),
    ({"sharded_data_parallel_degree": 0}, "sharded_data_parallel_degree"),
])
def test_errors_name_key_path(params: dict, key: str) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_v1(params)
    assert exc.value.errors[0].path == f"{KEY_PATH}.{key}"


def test_world_must_hold_model_replicas() -> None:
    with pytest.raises(ValidationError, match="must divide the number of processes"):
        check_v1_world(parse_v1({"pipeline_parallel_degree": 2, "tensor_parallel_degree": 2, "ddp": True}), 6)


def test_sharded_degree_must_divide_the_replicas() -> None:
    cfg = parse_v1({"sharded_data_parallel_degree": 2, "tensor_parallel_degree": 2, "ddp": True})
    check_v1_world(cfg, 8)
    with pytest.raises(ValidationError, match="must divide the number of model replicas"):
        check_v1_world(cfg, 6)


def test_parameters_without_effect_warn_once() -> None:
    from smdist_launcher.smp.v1 import notices

    notices._said.discard("param-fp16")
    with pytest.warns(UserWarning, match="fp16=true has no effect here"):
        parse_v1({"fp16": True})
