import json
from pathlib import Path

from smdist_launcher.compat import SITE_DIR
from smdist_launcher.container.process_environment import count_gpus, load_plan, plan_env, process_env
from smdist_launcher.contract import MLPaths, write_host_config

from .hostjobs import make_plan


def test_count_gpus_sources():
    assert count_gpus({"SMDIST_NUM_GPUS": "3", "CUDA_VISIBLE_DEVICES": "0"}) == 3
    assert count_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == 2
    assert count_gpus({"CUDA_VISIBLE_DEVICES": ""}) == 0


def test_plan_env_takes_redacted_secrets_from_process_env_only():
    plan = {"environment": {"HF_TOKEN": "***REDACTED***", "A": "1", "GONE_SECRET": "***REDACTED***"}}
    host = {"env": {"A": "2", "MASTER_ADDR": "algo-1"}}
    assert plan_env(plan, host, {"HF_TOKEN": "real"}) == {"HF_TOKEN": "real", "A": "2", "MASTER_ADDR": "algo-1"}


def test_process_env_local_mode(tmp_path):
    plan = make_plan("torchrun", port=1234)
    paths = write_host_config(tmp_path, plan, "algo-2")
    host_map = {"algo-1": "127.0.0.2", "algo-2": "127.0.0.3"}
    env = process_env(paths, plan, plan["hosts"][1], {"PYTHONPATH": "/user/lib", "SMDIST_NUM_GPUS": "0"}, host_map)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.2", "1234")
    assert env["SM_CURRENT_HOST"] == "algo-2" and env["SM_HOSTS"] == '["algo-1","algo-2"]'  # names, not addresses
    assert env["PYTHONPATH"].split(":") == [str(paths.code_dir), str(SITE_DIR), "/user/lib"]
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "lo"
    assert env["PYTHONUNBUFFERED"] == "1" and env["SM_NUM_GPUS"] == "0"
    assert json.loads(env["SM_TRAINING_ENV"])["master_hostname"] == "algo-1"


def test_toolkit_base_dir_points_at_the_hosts_tree_unless_it_is_opt_ml(tmp_path, monkeypatch):
    plan = make_plan("torchrun", port=1234)
    paths = write_host_config(tmp_path, plan, "algo-2")
    env = process_env(paths, plan, plan["hosts"][1], {"SAGEMAKER_BASE_DIR": "/elsewhere"}, {})
    assert env["SAGEMAKER_BASE_DIR"] == str(tmp_path)  # sagemaker_training reads this host, not /opt/ml
    monkeypatch.setattr("smdist_launcher.container.process_environment.DEFAULT_ROOT", str(tmp_path))
    assert "SAGEMAKER_BASE_DIR" not in process_env(paths, plan, plan["hosts"][1], {}, {})  # a real container


SM_PATHS = {"SM_MODEL_DIR": "model", "SM_OUTPUT_DIR": "output", "SM_OUTPUT_DATA_DIR": "output/data",
            "SM_OUTPUT_INTERMEDIATE_DIR": "output/intermediate", "SM_INPUT_DIR": "input",
            "SM_INPUT_CONFIG_DIR": "input/config", "SM_CHANNEL_TRAINING": "input/data/training",
            "SM_MODULE_DIR": "code"}


def test_the_script_is_told_the_paths_it_sees(tmp_path):
    """Host isolation mounts the host's tree on /opt/ml for its processes: every path they are told names /opt/ml,
    as in a SageMaker container; without it (seen = the tree itself) they name the sandbox tree."""
    plan = make_plan("mpirun", port=1234)
    plan["sagemaker_hyperparameters"]["sagemaker_submit_directory"] = '"src"'  # a local source_dir, as planned
    paths = write_host_config(tmp_path, plan, "algo-2")
    environ = {"SMDIST_CHECKPOINT_DIR": str(paths.checkpoints_dir), "SMDIST_NUM_GPUS": "0",
               "SAGEMAKER_BASE_DIR": "/inherited"}
    for seen_root in (Path("/opt/ml"), tmp_path):
        env = process_env(paths, plan, plan["hosts"][1], environ, {}, seen=MLPaths(seen_root))
        assert {k: env[k] for k in SM_PATHS} == {k: str(seen_root / v) for k, v in SM_PATHS.items()}
        te = json.loads(env["SM_TRAINING_ENV"])
        assert (te["model_dir"], te["module_dir"], te["input_config_dir"], te["output_data_dir"]) == (
            str(seen_root / "model"), str(seen_root / "code"), str(seen_root / "input/config"),
            str(seen_root / "output/data"))
        assert te["channel_input_dirs"] == {"training": str(seen_root / "input/data/training")}
        assert env["SMDIST_CHECKPOINT_DIR"] == str(seen_root / "checkpoints")
        assert env["PYTHONPATH"].split(":")[0] == str(seen_root / "code")
        assert env.get("SAGEMAKER_BASE_DIR") == (None if seen_root == Path("/opt/ml") else str(tmp_path))
        # the runtime's own variables keep the tree as the runtime reaches it
        assert env["SMDIST_RANK_CWD"] == str(paths.code_dir)
        assert env["SMDIST_STACKS_DIR"] == str(paths.run_dir / "stacks")
    default = process_env(paths, plan, plan["hosts"][1], environ, {})
    assert default["SM_MODEL_DIR"] == str(paths.model_dir)  # no isolation: the sandbox tree
    outside = process_env(paths, plan, plan["hosts"][1], {"SMDIST_CHECKPOINT_DIR": "/elsewhere"}, {},
                          seen=MLPaths("/opt/ml"))
    assert outside["SMDIST_CHECKPOINT_DIR"] == "/elsewhere"


def test_load_plan_errors(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError, match="pass --plan FILE, set \\$SMDIST_PLAN"):
        load_plan(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match="expected a JSON object with a 'hosts' list"):
        load_plan(tmp_path / "bad.json")


def test_quiet_launchers_torchrun_threads_and_mpirun_library_path(tmp_path):
    torchrun = make_plan("torchrun", port=1234)
    paths = write_host_config(tmp_path / "t", torchrun, "algo-1")
    env = process_env(paths, torchrun, torchrun["hosts"][0], {}, {})
    assert env["OMP_NUM_THREADS"] == "1"   # what torchrun would set, with its banner, for 2 processes per host
    assert process_env(paths, torchrun, torchrun["hosts"][0], {"OMP_NUM_THREADS": "8"}, {})["OMP_NUM_THREADS"] == "8"
    mpirun = make_plan("mpirun", port=1234)
    paths = write_host_config(tmp_path / "m", mpirun, "algo-1")
    env = process_env(paths, mpirun, mpirun["hosts"][0], {}, {})
    assert env["LD_LIBRARY_PATH"] == "" and "OMP_NUM_THREADS" not in env   # `-x LD_LIBRARY_PATH` finds it


def test_recorded_environment_keeps_what_the_job_set_and_redacts_secrets():
    import json as _json

    from smdist_launcher.container.process_environment import recorded_environment

    inherited = {"AWS_SESSION_TOKEN": "caller-secret", "HOME": "/root", "PATH": "/bin", "HF_TOKEN": "job-secret"}
    env = {**inherited, "SM_HPS": _json.dumps({"hub_token": "hp-secret", "lr": 0.1}),
           "SM_HP_HUB_TOKEN": "hp-secret", "SM_HP_LR": "0.1",
           "SM_USER_ARGS": _json.dumps(["--hub_token", "hp-secret", "--lr", "0.1"]),
           "SM_TRAINING_ENV": _json.dumps({"hyperparameters": {"hub_token": "hp-secret"}, "current_host": "algo-1"}),
           "PATH": "/bin", "PYTHONPATH": "/code"}
    out = recorded_environment(env, inherited, job_keys=["HF_TOKEN"])
    assert "hp-secret" not in _json.dumps(out) and "caller-secret" not in _json.dumps(out)
    assert "AWS_SESSION_TOKEN" not in out and "HOME" not in out and "PATH" not in out  # inherited: not recorded
    assert out["HF_TOKEN"] == "***REDACTED***" and out["SM_HP_LR"] == "0.1" and out["PYTHONPATH"] == "/code"
    assert _json.loads(out["SM_USER_ARGS"]) == ["--hub_token", "***REDACTED***", "--lr", "0.1"]
    assert _json.loads(out["SM_TRAINING_ENV"])["current_host"] == "algo-1"
