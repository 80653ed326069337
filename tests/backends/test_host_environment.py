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
