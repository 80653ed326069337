from __future__ import annotations

import json
import os
import sys

from smdist_launcher.backends.local.host_environment import host_environment

from .plans import tiny_plan


def test_host_environment_drops_inherited_launcher_state_and_adds_local_mode_keys():
    plan = tiny_plan(environment={"API_TOKEN": "s3cr3t", "MY_FLAG": "1"})
    parent = {"PATH": "/usr/bin", "RANK": "5", "OMPI_COMM_WORLD_RANK": "5", "SM_CURRENT_HOST": "algo-9",
              "SMDIST_PLAN": "/elsewhere.json", "SMDIST_JOBS_DIR": "/jobs", "HOME": "/root",
              "SMDIST_HOST_ISOLATION": "off"}
    env = host_environment(plan, "algo-2", parent, job_id="j-1", addresses={"algo-1": "127.1.0.2"},
                           host_roots={"algo-1": "/r1"}, gpus=None, checkpoint_dir="/r1/checkpoints")
    for gone in ("RANK", "OMPI_COMM_WORLD_RANK", "SM_CURRENT_HOST", "SMDIST_PLAN"):
        assert gone not in env
    assert env["SMDIST_JOBS_DIR"] == "/jobs" and env["HOME"] == "/root"
    assert env["SMDIST_HOST_ISOLATION"] == "off"  # the user's switch reaches the hosts' runtimes
    assert env["API_TOKEN"] == "s3cr3t"  # secrets travel through the environment only
    assert env["MY_FLAG"] == "1" and env["MASTER_PORT"] == "7777"
    assert env["SMDIST_JOB_ID"] == "j-1"
    assert json.loads(env["SMDIST_HOST_MAP"]) == {"algo-1": "127.1.0.2"}
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["SMDIST_NUM_GPUS"] == "0"
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    gpu = host_environment(plan, "algo-2", parent, job_id="j-1", addresses={}, host_roots={}, gpus=["2", "3"],
                           checkpoint_dir="/c")
    assert gpu["CUDA_VISIBLE_DEVICES"] == "2,3" and gpu["SMDIST_NUM_GPUS"] == "2"


# ---- scrub_host_secrets runs as root inside the job's own tree: links the job planted (issue 28) --------------
def _host_with_secret(tmp_path):
    from smdist_launcher.contract import MLPaths

    paths = MLPaths(tmp_path / "job" / "hosts" / "algo-1" / "opt" / "ml")
    paths.input_config_dir.mkdir(parents=True)
    paths.hyperparameters_file.write_text(json.dumps({"api_token": '"s3cret"', "epochs": "2"}))
    sentinel = tmp_path / "shadow"
    sentinel.write_bytes(b"root:x:0:0\n")
    return paths, sentinel


def test_scrub_redacts_and_writes_through_no_planted_temp_link(tmp_path):
    from smdist_launcher.backends.local.host_environment import scrub_host_secrets

    paths, sentinel = _host_with_secret(tmp_path)
    for pid in {os.getpid(), os.getppid(), *range(1, 64)}:
        (paths.input_config_dir / f".hyperparameters.json.{pid}.tmp").symlink_to(sentinel)
    scrub_host_secrets(paths)
    assert sentinel.read_bytes() == b"root:x:0:0\n"
    assert json.loads(paths.hyperparameters_file.read_text()) == {"api_token": '"***REDACTED***"', "epochs": "2"}


def test_scrub_neither_reads_nor_writes_through_a_linked_config_folder(tmp_path):
    from smdist_launcher.backends.local.host_environment import scrub_host_secrets

    paths, _ = _host_with_secret(tmp_path)
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "hyperparameters.json").write_text(json.dumps({"db_password": '"root-only"'}))
    before = (outside / "hyperparameters.json").read_bytes()
    paths.input_config_dir.rename(tmp_path / "moved")
    paths.input_config_dir.symlink_to(outside)  # input/config -> a folder of root's
    scrub_host_secrets(paths)
    assert (outside / "hyperparameters.json").read_bytes() == before
    assert sorted(os.listdir(outside)) == ["hyperparameters.json"]
    paths.input_config_dir.unlink()
    paths.input_config_dir.mkdir()
    paths.hyperparameters_file.symlink_to(outside / "hyperparameters.json")  # the file itself a link
    scrub_host_secrets(paths)
    assert (outside / "hyperparameters.json").read_bytes() == before and paths.hyperparameters_file.is_symlink()
