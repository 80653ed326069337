from pathlib import Path

from smdist_launcher.contract.layout import MLPaths, resolve_root


def test_paths_under_root():
    p = MLPaths("/r")
    assert p.resource_config_file == Path("/r/input/config/resourceconfig.json")
    assert p.channel_dir("train") == Path("/r/input/data/train")
    assert p.output_data_dir == Path("/r/output/data")
    assert p.failure_json_file == Path("/r/output/failure.json")
    assert p.code_dir == Path("/r/code")


def test_root_resolution_order():
    assert resolve_root("/x", {"SMDIST_ML_ROOT": "/y"}) == Path("/x")
    assert resolve_root(None, {"SMDIST_ML_ROOT": "/y"}) == Path("/y")
    assert resolve_root(None, {}) == Path("/opt/ml")
