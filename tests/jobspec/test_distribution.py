from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from smdist_launcher.jobspec import validate_args
from smdist_launcher.jobspec.distribution import Distribution

from .conftest import messages


def _smp_args(args: dict[str, Any], parameters: Any) -> dict[str, Any]:
    args["distribution"] = {"torch_distributed": {"enabled": True},
                            "smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}}}
    return args


def test_parameters_from_json_file(args: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "smp.json").write_text(json.dumps({"tensor_parallel_degree": 2, "hybrid_shard_degree": 8}))
    spec = validate_args("pytorch", _smp_args(args, "smp.json"), base_dir=str(tmp_path))
    assert spec.distribution is not None
    assert spec.distribution.normalized()["smdistributed"]["modelparallel"]["parameters"] == {
        "tensor_parallel_degree": 2, "hybrid_shard_degree": 8}


def test_parameters_file_keys_are_validated(args: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "smp.json").write_text(json.dumps({"tensor_parallel_degre": 2}))
    errs = messages("pytorch", _smp_args(args, "smp.json"), base_dir=str(tmp_path))
    assert "did you mean 'tensor_parallel_degree'" in errs[
        "distribution.smdistributed.modelparallel.parameters.tensor_parallel_degre"]


def test_parameters_file_missing_or_bad(args: dict[str, Any], tmp_path: Path) -> None:
    path = "distribution.smdistributed.modelparallel.parameters"
    assert "existing JSON file" in messages("pytorch", _smp_args(args, "nope.json"), base_dir=str(tmp_path))[path]
    (tmp_path / "bad.json").write_text("{nope")
    assert "cannot parse" in messages("pytorch", _smp_args(dict(args), "bad.json"), base_dir=str(tmp_path))[path]
    (tmp_path / "list.json").write_text("[1]")
    assert "must hold an object" in messages("pytorch", _smp_args(dict(args), "list.json"),
                                             base_dir=str(tmp_path))[path]


def test_normalized_keeps_only_given_keys() -> None:
    dist = Distribution.model_validate({"mpi": {"enabled": True}, "torch_distributed": {"enabled": False}})
    assert dist.normalized() == {"mpi": {"enabled": True}, "torch_distributed": {"enabled": False}}
    assert dist.on("mpi") and not dist.on("torch_distributed") and not dist.on("pytorchddp")


def test_instance_groups_names_one_group(args: dict[str, Any]) -> None:
    args["distribution"] = {"instance_groups": ["a", "b"]}
    assert "exactly one instance group" in messages("pytorch", args)["distribution.instance_groups"]
