"""SageMaker decides which hosts form each instance group: the plan's hosts are renamed to match resourceconfig.json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smdist_launcher.container.group_hosts import real_host_names, rename_hosts
from smdist_launcher.container.runtime import HostRuntime
from smdist_launcher.contract import write_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heterogeneous" / "plans" / "job.json"
# the example plan numbers data: algo-1, train: algo-2, algo-3; this cluster put the training group first
REAL = {"current_host": "algo-1", "current_group_name": "train", "hosts": ["algo-1", "algo-2", "algo-3"],
        "instance_groups": [{"instance_group_name": "data", "hosts": ["algo-3"], "instance_type": "ml.c5.2xlarge"},
                            {"instance_group_name": "train", "hosts": ["algo-2", "algo-1"],
                             "instance_type": "ml.p4d.24xlarge"}]}


def test_hosts_are_renamed_group_by_group() -> None:
    plan = json.loads(EXAMPLE.read_text())
    mapping = real_host_names(plan, REAL)
    assert mapping == {"algo-1": "algo-3", "algo-2": "algo-1", "algo-3": "algo-2"}
    renamed = rename_hosts(plan, mapping)
    assert renamed["master"]["host"] == "algo-1"
    assert [(h["name"], h["ranks"]) for h in renamed["hosts"]] == [("algo-3", []), ("algo-1", list(range(8))),
                                                                   ("algo-2", list(range(8, 16)))]
    train = renamed["hosts"][2]
    assert train["argv"][train["argv"].index("--master_addr") + 1] == "algo-1"
    assert {h["env"]["MASTER_ADDR"] for h in renamed["hosts"]} == {"algo-1"}
    assert [g["hosts"] for g in renamed["instance_groups"]] == [["algo-3"], ["algo-1", "algo-2"]]
    assert plan["master"]["host"] == "algo-2"   # the input is left alone


def test_nothing_to_rename() -> None:
    plan = json.loads(EXAMPLE.read_text())
    same = {"instance_groups": [{"instance_group_name": g["name"], "hosts": g["hosts"]}
                                for g in plan["instance_groups"]]}
    assert real_host_names(plan, same) == {} and real_host_names(plan, {}) == {}
    with pytest.raises(ValueError, match="train: 2 host"):
        real_host_names(plan, {"instance_groups": [{"instance_group_name": "data", "hosts": ["algo-1"]},
                                                   {"instance_group_name": "train", "hosts": ["algo-2"]}]})


def test_the_runtime_picks_its_part_from_the_real_groups(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(EXAMPLE.read_text())
    root = tmp_path / "opt" / "ml"
    write_json(root / "input" / "config" / "resourceconfig.json", {**REAL, "current_host": "algo-3"})
    runtime = HostRuntime(root, plan_path=plan_file, install=False, environ={})
    assert runtime.host == "algo-3" and runtime.host_plan["argv"][:2] == ["python", "train.py"]
    write_json(root / "input" / "config" / "resourceconfig.json", REAL)
    master = HostRuntime(root, plan_path=plan_file, install=False, environ={})
    assert master.host_plan["ranks"] == list(range(8)) and master.host_plan["argv"][0] == "torchrun"
