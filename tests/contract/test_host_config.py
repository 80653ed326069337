import json
import stat

from smdist_launcher.contract import write_host_config


def test_write_host_config_tree_and_redaction(tmp_path):
    plan = {"job_name": "j", "instance_type": "local", "network_interface": "lo",
            "hosts": [{"name": "algo-1", "env": {"HF_TOKEN": "s3cret", "A": "1"}}, {"name": "algo-2", "env": {}}],
            "sagemaker_hyperparameters": {"sagemaker_program": '"train.py"'},
            "channels": {"training": {"uri": "file:///d", "input_mode": "File"}},
            "environment": {"WANDB_API_KEY": "k", "PLAIN": "v"}}
    paths = write_host_config(tmp_path / "opt" / "ml", plan, "algo-2")
    for d in ("input/data/training", "model", "output/data", "output/intermediate", "code", "checkpoints", "run"):
        assert (paths.root / d).is_dir(), d
    rc = json.loads(paths.resource_config_file.read_text())
    assert rc["current_host"] == "algo-2" and rc["network_interface_name"] == "lo"
    assert json.loads(paths.hyperparameters_file.read_text()) == {"sagemaker_program": '"train.py"'}
    assert json.loads(paths.input_data_config_file.read_text())["training"]["TrainingInputMode"] == "File"
    text = paths.plan_file.read_text()
    assert "s3cret" not in text and '"k"' not in text
    saved = json.loads(text)
    assert saved["environment"] == {"WANDB_API_KEY": "***REDACTED***", "PLAIN": "v"}
    assert saved["hosts"][0]["env"] == {"HF_TOKEN": "***REDACTED***", "A": "1"}
    assert plan["environment"]["WANDB_API_KEY"] == "k"  # the caller's dict is untouched
    assert stat.S_IMODE(paths.plan_file.stat().st_mode) == 0o644


def test_rewriting_a_host_folder_the_job_owns_follows_no_planted_link(tmp_path):
    """A retry rewrites the config files in a host folder the job's code has owned (issue 28)."""
    import pytest

    plan = {"job_name": "j", "instance_type": "local", "network_interface": "lo", "hosts": [{"name": "algo-1"}],
            "channels": {"training": {"uri": "file:///d", "input_mode": "File"}}}
    paths = write_host_config(tmp_path / "hosts" / "algo-1" / "opt" / "ml", plan, "algo-1")
    outside = tmp_path / "etc"
    outside.mkdir()
    paths.input_config_dir.rename(tmp_path / "moved")
    paths.input_config_dir.symlink_to(outside)  # input/config -> a folder of root's
    with pytest.raises(NotADirectoryError):
        write_host_config(paths.root, plan, "algo-1")
    assert list(outside.iterdir()) == []
    paths.input_config_dir.unlink()
    (tmp_path / "moved").rename(paths.input_config_dir)
    sentinel = tmp_path / "shadow"
    sentinel.write_text("root:x:0:0\n")
    paths.resource_config_file.unlink()
    paths.resource_config_file.symlink_to(sentinel)  # a file link: replaced, not written through
    paths.channel_dir("training").rmdir()
    paths.channel_dir("training").symlink_to(outside)  # a channel staged as a link: left for staging to replace
    write_host_config(paths.root, plan, "algo-1")
    assert sentinel.read_text() == "root:x:0:0\n" and not paths.resource_config_file.is_symlink()
    assert list(outside.iterdir()) == []
