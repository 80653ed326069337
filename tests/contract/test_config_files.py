import json

import pytest

from smdist_launcher.contract.config_files import (
    hyperparameters_for,
    input_data_config_for,
    read_json,
    resource_config_for,
    write_json,
)


def _plan(hosts=("algo-1", "algo-2", "algo-10")):
    return {"instance_type": "ml.p4d.24xlarge", "network_interface": "eth0",
            "hosts": [{"name": h} for h in hosts], "sagemaker_hyperparameters": {"epochs": "2"},
            "channels": {"train": {"uri": "s3://b/t", "input_mode": "File", "content_type": "text/csv",
                                   "distribution": "ShardedByS3Key"},
                         "test": {"uri": "file:///x"}}}


def test_resource_config_shape():
    assert resource_config_for(_plan(), "algo-2") == {
        "current_group_name": "homogeneousCluster", "current_host": "algo-2",
        "current_instance_type": "ml.p4d.24xlarge",
        "hosts": ["algo-1", "algo-10", "algo-2"],  # lexicographic, as SageMaker documents
        "instance_groups": [{"hosts": ["algo-1", "algo-2", "algo-10"], "instance_group_name": "homogeneousCluster",
                             "instance_type": "ml.p4d.24xlarge"}],
        "network_interface_name": "eth0"}


def test_resource_config_of_instance_groups():
    plan = {"instance_type": "ml.p4d.24xlarge", "network_interface": "eth0",
            "hosts": [{"name": f"algo-{i}"} for i in (1, 2, 3)],
            "instance_groups": [{"name": "data", "instance_type": "ml.c5.18xlarge", "hosts": ["algo-1"]},
                                {"name": "train", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-2", "algo-3"]}]}
    data, train = resource_config_for(plan, "algo-1"), resource_config_for(plan, "algo-3")
    assert (data["current_group_name"], data["current_instance_type"]) == ("data", "ml.c5.18xlarge")
    assert (train["current_group_name"], train["current_instance_type"]) == ("train", "ml.p4d.24xlarge")
    assert train["instance_groups"] == [
        {"hosts": ["algo-1"], "instance_group_name": "data", "instance_type": "ml.c5.18xlarge"},
        {"hosts": ["algo-2", "algo-3"], "instance_group_name": "train", "instance_type": "ml.p4d.24xlarge"}]
    assert train["hosts"] == ["algo-1", "algo-2", "algo-3"]


def test_resource_config_unknown_host():
    with pytest.raises(KeyError, match="algo-9.*algo-1, algo-2"):
        resource_config_for(_plan(("algo-1", "algo-2")), "algo-9")


def test_input_data_config_shape_and_mode_override():
    assert input_data_config_for(_plan(), {"test": "Pipe"}) == {
        "test": {"RecordWrapperType": "None", "S3DistributionType": "FullyReplicated", "TrainingInputMode": "Pipe"},
        "train": {"ContentType": "text/csv", "RecordWrapperType": "None", "S3DistributionType": "ShardedByS3Key",
                  "TrainingInputMode": "File"}}


def test_hyperparameters_from_plan_or_encoded():
    assert hyperparameters_for(_plan()) == {"epochs": "2"}
    assert hyperparameters_for({"hyperparameters": {"a": "x"}}) == {"a": '"x"'}


def test_json_roundtrip_and_bad_json(tmp_path):
    write_json(tmp_path / "a" / "x.json", {"b": 1})
    assert read_json(tmp_path / "a" / "x.json") == {"b": 1}
    assert read_json(tmp_path / "missing.json", default={}) == {}
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        read_json(tmp_path / "bad.json")
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"b": 1}


# ---- links planted by a job's code in its own folder (issue 28) ----------------------------------
def test_write_json_never_writes_through_a_planted_temp_link(tmp_path):
    """The old temp name was .<name>.<pid>.tmp, opened O_TRUNC: a link planted there made root write any file."""
    import os

    sentinel = tmp_path / "shadow"
    sentinel.write_bytes(b"root:x:0:0\n")
    folder = tmp_path / "config"
    folder.mkdir()
    for pid in {os.getpid(), os.getppid(), *range(1, 64)}:
        (folder / f".hyperparameters.json.{pid}.tmp").symlink_to(sentinel)
    (folder / "hyperparameters.json").symlink_to(sentinel)  # and the file itself: replaced, not written through
    write_json(folder / "hyperparameters.json", {"a": 1})
    assert sentinel.read_bytes() == b"root:x:0:0\n"
    assert json.loads((folder / "hyperparameters.json").read_text()) == {"a": 1}
    assert not (folder / "hyperparameters.json").is_symlink()
    assert not any(p.name.endswith(".tmp") and not p.is_symlink() for p in folder.iterdir())


def test_read_json_refuses_a_linked_file(tmp_path):
    sentinel = tmp_path / "root-config.json"
    sentinel.write_text('{"aws_secret_access_key": "x"}')
    (tmp_path / "hyperparameters.json").symlink_to(sentinel)
    with pytest.raises(OSError):
        read_json(tmp_path / "hyperparameters.json")
    assert read_json(tmp_path / "missing.json", default={"d": 1}) == {"d": 1}
