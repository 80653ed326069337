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
