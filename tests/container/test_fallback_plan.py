import json
import subprocess
import sys

import pytest

from smdist_launcher.container.fallback_plan import plan_from_contract
from smdist_launcher.contract import MLPaths, write_json

RC = {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "current_instance_type": "ml.m5.xlarge"}
HPS = {"lr": "0.5", "sagemaker_program": '"train.py"', "sagemaker_job_name": '"j"'}


def test_plan_like_the_toolkit_process_runner():
    plan = plan_from_contract(RC, HPS)
    assert [h["argv"] for h in plan["hosts"]] == [["python", "train.py", "--lr", "0.5"]] * 2
    assert [(h["name"], h["ranks"]) for h in plan["hosts"]] == [("algo-1", [0]), ("algo-2", [1])]
    assert plan["master"] == {"host": "algo-1", "port": 7777}
    with pytest.raises(ValueError, match="no sagemaker_program"):
        plan_from_contract(RC, {})


def test_runtime_without_a_plan_file(tmp_path):
    paths = MLPaths(tmp_path / "ml")
    write_json(paths.resource_config_file, {**RC, "current_host": "algo-1", "hosts": ["algo-1"]})
    write_json(paths.hyperparameters_file, HPS)
    paths.code_dir.mkdir(parents=True)
    (paths.code_dir / "train.py").write_text("import sys, os\nprint(sys.argv[1:], os.environ['SM_CURRENT_HOST'])\n")
    r = subprocess.run([sys.executable, "-m", "smdist_launcher.container", "--root", str(paths.root), "--no-install"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "SMDIST_NUM_GPUS": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[algo-1 r0] ['--lr', '0.5'] algo-1" in r.stdout
    assert paths.success_file.exists() and json.loads(paths.environment_file.read_text())["SM_HP_LR"] == "0.5"
