from __future__ import annotations

import pytest
from pydantic import ValidationError as PydanticValidationError

from smdist_launcher.jobspec.smp_parameters import SHARED_KEYS, V1_KEYS, V2_KEYS, SMPParameters


@pytest.mark.parametrize("value", ["spread", "cluster", "DPT", "TPD", "PTD"])
def test_placement_strategy_accepts_words_and_permutations(value: str) -> None:
    assert SMPParameters.model_validate({"placement_strategy": value}).placement_strategy == value


@pytest.mark.parametrize("value", ["DDT", "clustered", "dpt", ""])
def test_placement_strategy_rejects_others(value: str) -> None:
    with pytest.raises(PydanticValidationError, match="ordering of the letters"):
        SMPParameters.model_validate({"placement_strategy": value})


@pytest.mark.parametrize(("key", "value"), [
    ("ddp_port", 0), ("ddp_port", 70000), ("microbatches", 0), ("memory_weight", 1.5), ("partitions", 0),
    ("active_microbatches", 0), ("ddp", 1), ("optimize", "fast"), ("hybrid_shard_degree", -1), ("microbatches", "4"),
])
def test_rejected_values(key: str, value: object) -> None:
    with pytest.raises(PydanticValidationError):
        SMPParameters.model_validate({key: value})


def test_key_sets_partition_the_fields() -> None:
    assert V1_KEYS | V2_KEYS | SHARED_KEYS == set(SMPParameters.model_fields)
    assert not (V1_KEYS & V2_KEYS)
    assert {"partitions", "pipeline_parallel_degree", "microbatches", "ddp"} <= V1_KEYS
    assert {"hybrid_shard_degree", "context_parallel_degree", "expert_parallel_degree", "random_seed"} <= V2_KEYS


def test_the_model_declares_exactly_the_contract_keys() -> None:
    # The runtimes parse mp_parameters from the contract's key list; the SDK's model must type every key of it.
    from smdist_launcher.contract.smp_parameters import ALL_KEYS
    from smdist_launcher.jobspec.smp_parameters import SMPParameters

    assert set(SMPParameters.model_fields) == set(ALL_KEYS)
