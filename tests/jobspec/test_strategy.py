"""The launcher decision: precedence, processes per host, MPI options, contradictions."""
from __future__ import annotations

from typing import Any

import pytest

from smdist_launcher.jobspec.catalog import lookup
from smdist_launcher.jobspec.distribution import Distribution
from smdist_launcher.jobspec.strategy import decide

P4D = lookup("ml.p4d.24xlarge")
SMP = {"enabled": True, "parameters": {"tensor_parallel_degree": 2}}


def _decide(dist: dict[str, Any], instance: Any = P4D) -> tuple[str | None, int, list[str]]:
    launch = decide(Distribution.model_validate(dist), instance)
    return launch.strategy, launch.processes_per_host, sorted(e.path for e in launch.errors)


@pytest.mark.parametrize(("dist", "strategy"), [
    ({}, "single"),
    ({"torch_distributed": {"enabled": True}}, "torch_distributed"),
    ({"pytorchddp": {"enabled": True}}, "pytorchddp"),
    ({"smdistributed": {"dataparallel": {"enabled": True}}}, "smddp"),
    ({"smdistributed": {"modelparallel": SMP}, "mpi": {"enabled": True}}, "smp_v1"),
    ({"smdistributed": {"modelparallel": SMP}, "torch_distributed": {"enabled": True}}, "smp_v2"),
    ({"mpi": {"enabled": True}}, "mpi"),
    ({"parameter_server": {"enabled": True}}, "parameter_server"),
    ({"multi_worker_mirrored_strategy": {"enabled": True}}, "multi_worker_mirrored_strategy"),
    ({"torch_distributed": {"enabled": False}, "mpi": {"enabled": False}}, "single"),
])
def test_strategy_table(dist: dict[str, Any], strategy: str) -> None:
    assert _decide(dist)[0] == strategy and _decide(dist)[2] == []


def test_processes_per_host_defaults() -> None:
    assert _decide({"torch_distributed": {"enabled": True}})[1] == 8
    assert _decide({"torch_distributed": {"enabled": True}}, lookup("ml.trn1.32xlarge"))[1] == 32
    assert _decide({"torch_distributed": {"enabled": True}}, lookup("ml.m5.xlarge"))[1] == 1
    assert _decide({"torch_distributed": {"enabled": True}}, lookup("local_gpu"))[1] == 1
    assert _decide({})[1] == 1 and _decide({"parameter_server": {"enabled": True}})[1] == 1


def test_mpi_processes_per_host_is_the_knob_for_every_launcher() -> None:
    assert _decide({"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}})[1:] == (2, [])
    assert _decide({"smdistributed": {"dataparallel": {"enabled": True}}, "mpi": {"processes_per_host": 4}})[1:] == (4,
                                                                                                                     [])


def test_processes_per_host_needs_multi_process_launcher() -> None:
    assert _decide({"parameter_server": {"enabled": True}, "mpi": {"enabled": False, "processes_per_host": 2}})[2] == [
        "distribution.mpi.processes_per_host"]
    assert _decide({"mpi": {"processes_per_host": 2}})[2] == ["distribution.mpi.enabled"]


def test_custom_mpi_options_source_follows_strategy() -> None:
    launch = decide(Distribution.model_validate({"smdistributed": {"dataparallel": {"enabled": True,
                                                                                    "custom_mpi_options": "-x A=1"}}}),
                    P4D)
    assert launch.custom_mpi_options == "-x A=1"
    launch = decide(Distribution.model_validate({"mpi": {"enabled": True, "custom_mpi_options": "-x B=2"}}), P4D)
    assert launch.custom_mpi_options == "-x B=2"
    assert _decide({"smdistributed": {"dataparallel": {"enabled": True}},
                    "mpi": {"custom_mpi_options": "-x C"}})[2] == [
        "distribution.mpi.custom_mpi_options"]
    assert _decide({"torch_distributed": {"enabled": True}, "mpi": {"custom_mpi_options": "-x C"}})[2] == [
        "distribution.mpi.custom_mpi_options"]
    assert _decide({"mpi": {"enabled": True,
                            "custom_mpi_options": "-x 'unbalanced"}})[2] == ["distribution.mpi.custom_mpi_options"]


@pytest.mark.parametrize(("dist", "paths"), [
    ({"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}}, ["distribution.mpi.enabled"]),
    ({"pytorchddp": {"enabled": True}, "torch_distributed": {"enabled": True}}, ["distribution.torch_distributed"]),
    ({"pytorchddp": {"enabled": True}, "smdistributed": {"dataparallel": {"enabled": True}}},
     ["distribution.pytorchddp"]),
    ({"pytorchddp": {"enabled": True}, "mpi": {"enabled": True}}, ["distribution.mpi.enabled"]),
    ({"smdistributed": {"dataparallel": {"enabled": True}}, "mpi": {"enabled": True}}, ["distribution.mpi.enabled"]),
    ({"smdistributed": {"dataparallel": {"enabled": True}}, "torch_distributed": {"enabled": True}},
     ["distribution.torch_distributed"]),
    ({"smdistributed": {"dataparallel": {"enabled": True}, "modelparallel": SMP}, "mpi": {"enabled": True}},
     ["distribution.smdistributed"]),
    ({"mpi": {"enabled": True}, "parameter_server": {"enabled": True}}, ["distribution.parameter_server"]),
    ({"multi_worker_mirrored_strategy": {"enabled": True}, "parameter_server": {"enabled": True}},
     ["distribution.multi_worker_mirrored_strategy"]),
    ({"smdistributed": {"modelparallel": SMP}}, ["distribution.smdistributed.modelparallel"]),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 2}}}},
     ["distribution.torch_distributed"]),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"microbatches": 2}}}}, ["distribution.mpi"]),
    ({"smdistributed": {"modelparallel": SMP}, "mpi": {"enabled": True}, "torch_distributed": {"enabled": True}},
     ["distribution.mpi.enabled"]),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"microbatches": 2}}},
      "torch_distributed": {"enabled": True}},
     ["distribution.smdistributed.modelparallel.parameters.microbatches"]),
    ({"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"random_seed": 2}}},
      "mpi": {"enabled": True}},
     ["distribution.smdistributed.modelparallel.parameters.random_seed"]),
    ({"pytorchxla": {"enabled": True}}, ["distribution.pytorchxla.enabled"]),
    ({"torch_distributed": {}}, ["distribution.torch_distributed.enabled"]),
    ({"smdistributed": {}}, ["distribution.smdistributed"]),
    ({"smdistributed": {"dataparallel": {}}}, ["distribution.smdistributed.dataparallel.enabled"]),
])
def test_contradictions_are_named(dist: dict[str, Any], paths: list[str]) -> None:
    assert _decide(dist)[2] == paths
