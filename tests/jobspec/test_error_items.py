from __future__ import annotations

from pydantic import ValidationError as PydanticValidationError

from smdist_launcher.jobspec.distribution import Distribution
from smdist_launcher.jobspec.error_items import did_you_mean, from_pydantic, join_path


def _errors(data: object) -> dict[str, str]:
    try:
        Distribution.model_validate(data)
    except PydanticValidationError as exc:
        return {e.path: e.message for e in from_pydantic(exc, Distribution, prefix=("distribution",))}
    return {}


def test_join_path() -> None:
    assert join_path("instance_groups", 0, "instance_type") == "instance_groups[0].instance_type"
    assert join_path("distribution", "mpi") == "distribution.mpi"


def test_did_you_mean() -> None:
    assert did_you_mean("process_per_host", ["processes_per_host", "enabled"]) == "; did you mean 'processes_per_host'?"
    assert did_you_mean("zzz", ["enabled"]) == ""
    assert did_you_mean(3, ["enabled"]) == ""


def test_messages_are_ours() -> None:
    errs = _errors({"mpi": {"enabled": "yes", "processes_per_host": 0, "process_per_host": 2},
                    "smdistributed": {"modelparallel": {"enabled": True, "microbatches": 2,
                                                        "parameters": {"pipeline": "fast", "enabled": True}}}})
    assert errs == {
        "distribution.mpi.enabled": "must be true or false, got 'yes'",
        "distribution.mpi.processes_per_host": "must be ≥ 1, got 0",
        "distribution.mpi.process_per_host": "unknown key; did you mean 'processes_per_host'? "
                                             "(allowed: custom_mpi_options, enabled, processes_per_host)",
        "distribution.smdistributed.modelparallel.microbatches": "unknown key; it belongs under 'parameters' "
                                                                 "(allowed: enabled, parameters)",
        "distribution.smdistributed.modelparallel.parameters.pipeline":
            "must be one of 'simple', 'interleaved' or '_only_forward', got 'fast'",
        "distribution.smdistributed.modelparallel.parameters.enabled":
            "unknown key; it belongs one level up, in 'modelparallel'",
    }
    assert not any("Input should" in m for m in errs.values())


def test_non_string_keys_and_wrong_container_types() -> None:
    errs = _errors({1: {}, "mpi": [], "instance_groups": "g"})
    assert errs["distribution.mpi"].startswith("must be a mapping")
    assert errs["distribution.instance_groups"].startswith("must be a list")
    assert "distribution[1]" in errs or "distribution.1" in errs


def test_quoted_numbers_and_booleans_get_a_hint() -> None:
    errs = _errors({"mpi": {"enabled": "true", "processes_per_host": "8"}})
    assert errs == {"distribution.mpi.enabled": "must be true or false, got 'true'; write it without quotes",
                    "distribution.mpi.processes_per_host": "must be an integer, got '8'; write it without quotes"}


def test_did_you_mean_offers_only_close_matches() -> None:
    from smdist_launcher.jobspec.catalog import known_instance_types

    assert did_you_mean("ml.p9.mega", known_instance_types()) == ""           # a shared "ml." is no resemblance
    assert did_you_mean("ml.p4d.24xlarg", known_instance_types()) == "; did you mean 'ml.p4d.24xlarge'?"
    assert did_you_mean("input", ["input_mode", "instance_type"]) == ""
    assert did_you_mean("enabeld", ["enabled"]) == "; did you mean 'enabled'?"  # swapped letters are one typo
    assert did_you_mean("Instance-Count", ["instance_count"]) == "; did you mean 'instance_count'?"
