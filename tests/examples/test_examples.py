"""Every example job validates, its plan matches the pinned plans/job.json, and broken variants fail with exactly the
expected key paths.

Regenerate the pinned plans after an intended change: ``smdist plan job.yaml --write plans/job.json`` in the
example's folder.
"""
from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from smdist_launcher import jobspec as spec
from smdist_launcher.errors import ValidationError
from smdist_launcher.plan import snapshot
from smdist_launcher.plan.planner import build_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = sorted(p.parents[1].name for p in EXAMPLES.glob("*/plans/job.json"))
REMOVE = object()
P = "distribution.smdistributed.modelparallel.parameters."

# example → [(key path to change, new value or REMOVE, expected error paths)]
VARIANTS: dict[str, list[tuple[str, Any, list[str]]]] = {
    "smddp_p4d": [
        ("instance_count", 0, ["instance_count"]),
        ("distribution.smdistributed.dataparallel.enabeld", True, ["distribution.smdistributed.dataparallel.enabeld"]),
        ("instance_type", "ml.p4d.24xlarg", ["instance_type"]),
    ],
    "smp_v1_tp": [
        (P + "tensor_parallel_degree", 3, [P + "tensor_parallel_degree"]),
        ("distribution.mpi", REMOVE, ["distribution.mpi"]),
    ],
    "smp_v1_tp_pp": [
        (P + "microbatches", 0, [P + "microbatches"]),
        (P + "pipeline", "fast", [P + "pipeline"]),
    ],
    "smp_v2": [
        (P + "hybrid_shard_degree", 3, [P + "hybrid_shard_degree"]),
        ("distribution.torch_distributed", REMOVE, ["distribution.torch_distributed"]),
    ],
    "pytorchddp": [
        ("distribution.smdistributed", {"dataparallel": {"enabled": True}}, ["distribution.pytorchddp"]),
        ("distribution.pytorchddp.enabled", "yes please", ["distribution.pytorchddp.enabled"]),
    ],
    "torch_distributed": [
        ("distribution.mpi", {"enabled": True}, ["distribution.mpi.enabled"]),
        ("entry_point", "missing.py", ["entry_point"]),
    ],
    "mpi": [
        ("distribution.mpi.processes_per_host", 0, ["distribution.mpi.processes_per_host"]),
        ("distribution.mpi.custom_mpi_options", "-x 'unclosed",
         ["distribution.mpi.custom_mpi_options"]),  # caught by the planner
    ],
    "parameter_server": [
        ("distribution.mpi", {"enabled": True}, ["distribution.parameter_server"]),
        ("framework_version", "2.x", ["framework_version"]),
    ],
    "heterogeneous": [
        ("distribution.instance_groups", REMOVE, ["distribution.instance_groups"]),
        ("distribution.instance_groups", ["trian"], ["distribution.instance_groups[0]"]),
        ("instance_groups", [{"instance_group_name": "data", "instance_type": "ml.c5.2xlarge",
                              "instance_count": 1}] * 2,
         ["instance_groups[1].instance_group_name", "distribution.instance_groups[0]"]),
    ],
    "trn1": [
        ("distribution", {"mpi": {"enabled": True}}, ["distribution.mpi"]),
        ("instance_count", -1, ["instance_count"]),
    ],
}


def _job_data(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name / "job.yaml").read_text(encoding="utf-8"))


def _plan(name: str, data: dict[str, Any]):
    folder = EXAMPLES / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job_file = spec.parse_job_file(data, path=str(folder / "job.yaml"), base_dir=str(folder))
    return build_plan(spec.resolve(job_file), job_file.inputs)


def test_every_seed_configuration_has_an_example() -> None:
    assert NAMES == sorted(VARIANTS)


@pytest.mark.parametrize("name", NAMES)
def test_example_matches_pinned_plan(name: str) -> None:
    folder = EXAMPLES / name
    data = _job_data(name)
    assert (folder / data["entry_point"]).is_file()
    result = snapshot.check(snapshot.render(_plan(name, data), "json"), folder / "plans" / "job.json")
    assert result.matches, result.message()


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    if value is REMOVE:
        del data[last]
    else:
        data[last] = value


@pytest.mark.parametrize(("name", "key", "value", "paths"),
                         [(name, key, value, paths) for name, rows in VARIANTS.items() for key, value, paths in rows],
                         ids=lambda v: v if isinstance(v, str) else None)
def test_invalid_variant_reports_exact_paths(name: str, key: str, value: Any, paths: list[str]) -> None:
    data = copy.deepcopy(_job_data(name))
    _set(data, key, value)
    with pytest.raises(ValidationError) as info:
        _plan(name, data)
    assert [e.path for e in info.value.errors] == paths
    assert all(e.message for e in info.value.errors)
