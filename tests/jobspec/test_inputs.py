from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import normalize_inputs
from smdist_launcher.plan.model import Channel

from .fuzz_strategies import values


def _paths(inputs: object, **kw: object) -> list[str]:
    with pytest.raises(ValidationError) as info:
        normalize_inputs(inputs, **kw)  # type: ignore[arg-type]
    return sorted(e.path for e in info.value.errors)


def test_string_is_training_channel() -> None:
    assert normalize_inputs("s3://bucket/train") == {"training": Channel(uri="s3://bucket/train")}


def test_none_is_no_channels() -> None:
    assert normalize_inputs(None) == {}


def test_mapping_of_strings_and_dicts() -> None:
    channels = normalize_inputs({"train": "s3://bucket/train",
                                 "test": {"uri": "s3://bucket/test", "input_mode": "FastFile",
                                          "distribution": "ShardedByS3Key"}})
    assert channels["test"] == Channel(uri="s3://bucket/test", input_mode="FastFile", distribution="ShardedByS3Key")


def test_local_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    # relative paths and the relative file:// form (SageMaker local mode's reading) resolve against the current folder
    assert normalize_inputs("data/mnist", instance_type="local")["training"].uri == f"file://{tmp_path}/data/mnist"
    assert normalize_inputs("file://data/mnist")["training"].uri == f"file://{tmp_path}/data/mnist"
    assert normalize_inputs("file:///data/mnist")["training"].uri == "file:///data/mnist"
    assert normalize_inputs("file://localhost/data")["training"].uri == "file:///data"
    assert normalize_inputs("file://data", base_dir="/jobs")["training"].uri == "file:///jobs/data"
    assert normalize_inputs("/abs/data", base_dir="/jobs")["training"].uri == "file:///abs/data"


def test_local_data_needs_local_instance() -> None:
    assert _paths({"train": "file://data"}, instance_type="ml.p4d.24xlarge") == ["inputs.train.uri"]


def test_all_problems_at_once() -> None:
    paths = _paths({"train": "http://x/y", "bad name": "s3://bucket/x", "test": {"uri": "s3://bucket/t",
                                                                                 "input_mod": "File"},
                    "val": {"uri": "s3://bucket/v", "input_mode": "Stream"}, "empty": ""})
    assert paths == ["inputs.bad name", "inputs.empty.uri", "inputs.test.input_mod", "inputs.train.uri",
                     "inputs.val.input_mode"]


def test_not_a_mapping() -> None:
    assert _paths(3) == ["inputs"]
    assert _paths(["s3://bucket/x"]) == ["inputs"]


def test_bad_s3_bucket() -> None:
    assert _paths("s3://Bucket_Upper/x") == ["inputs.training.uri"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(inputs=st.one_of(values, st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=12), values),
                                                max_size=3)),
       instance_type=st.sampled_from([None, "local", "ml.p4d.24xlarge"]))
def test_random_inputs_raise_only_validation_errors(inputs: object, instance_type: str | None) -> None:
    try:
        normalize_inputs(inputs, instance_type=instance_type)
    except ValidationError as exc:
        assert exc.errors and all(e.path.startswith("inputs") and e.message for e in exc.errors)


def test_missing_local_folders_are_errors_when_asked(tmp_path) -> None:
    (tmp_path / "data" / "train").mkdir(parents=True)
    ok = normalize_inputs({"train": "data/train", "t2": "file://data/train"}, base_dir=str(tmp_path), check_exists=True)
    assert ok["t2"].uri == f"file://{tmp_path}/data/train"
    with pytest.raises(ValidationError) as info:
        normalize_inputs({"a": "data/nope", "b": "file://fileserver/share"}, base_dir=str(tmp_path), check_exists=True)
    a, b = info.value.errors
    assert a.path == "inputs.a.uri" and f"{tmp_path}/data/nope does not exist; create it or fix the path" in a.message
    # a host-looking file:// URI says how it was read and what to write instead
    assert "file://fileserver/share is the path fileserver/share relative to the current folder" in b.message
    assert "an absolute path is file:///fileserver/share" in b.message
