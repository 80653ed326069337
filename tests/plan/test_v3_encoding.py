"""SDK v3's hyperparameter contract in the plan (hyperparameter_encoding v3, ModelTrainer's jobs): argv of every
launcher, hyperparameters.json and the hosts' SM_HP_* / SM_HPS as v3's own container drivers make them; v2 plans stay
as they were."""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher.contract.hyperparameters import HyperparameterEncoding
from smdist_launcher.contract.secrets import REDACTED
from smdist_launcher.jobspec.resolved import ResolvedJob
from smdist_launcher.plan.model import LaunchPlan
from smdist_launcher.plan.planner import build_plan

V3 = HyperparameterEncoding.V3
# AWS's v3 contract values (sagemaker-train/tests/data/params_script) and what v3's drivers pass for them
EXPECTED = {"integer": 1, "boolean": True, "float": 3.14, "string": "Hello World", "list": [1, 2, 3],
            "dict": {"string": "value", "integer": 3, "float": 3.14, "list": [1, 2, 3], "dict": {"key": "value"},
                     "boolean": True}}
DICT = '{"string": "value", "integer": 3, "float": 3.14, "list": [1, 2, 3], "dict": {"key": "value"}, "boolean": true}'
ARGS = ["--integer", "1", "--boolean", "true", "--float", "3.14", "--string", "Hello World", "--list", "[1, 2, 3]",
        "--dict", DICT]


def _v3(make_job: Callable[..., ResolvedJob], **overrides: Any) -> LaunchPlan:
    return build_plan(make_job(hyperparameters=EXPECTED, hyperparameter_encoding=V3, **overrides))


def test_every_launcher_passes_v3s_arguments(make_job: Callable[..., ResolvedJob]) -> None:
    single = _v3(make_job, strategy="single", instance_count=1, processes_per_host=1)
    assert single.hosts[0].argv == ["python", "train.py", *ARGS]
    shell = _v3(make_job, strategy="single", instance_count=1, processes_per_host=1, entry_point="train.sh")
    assert shell.hosts[0].argv == ["/bin/sh", "train.sh", *ARGS]
    torchrun = _v3(make_job)
    assert all(h.argv[-len(ARGS) - 1:] == ["train.py", *ARGS] for h in torchrun.hosts)
    mpi = _v3(make_job, strategy="mpi")
    master = mpi.hosts[0].argv
    assert master[-len(ARGS) - 4:] == ["python", "-m", "mpi4py", "train.py", *ARGS]
    # the hyperparameters' variables reach the ranks with their hosts' environment, not as mpirun -x names
    assert not any(a.startswith("SM_HP") for a in master)
    assert master == build_plan(make_job(hyperparameters=EXPECTED, strategy="mpi")).hosts[0].argv[:-12] + ARGS


def test_hyperparameters_json_holds_v3s_values_and_our_keys_json(make_job: Callable[..., ResolvedJob]) -> None:
    plan = _v3(make_job)
    ours = {k: v for k, v in plan.sagemaker_hyperparameters.items() if k.startswith("sagemaker_")}
    assert {k: v for k, v in plan.sagemaker_hyperparameters.items() if k not in ours} == {
        "integer": "1", "boolean": "true", "float": "3.14", "string": "Hello World", "list": "[1, 2, 3]", "dict": DICT}
    assert ours["sagemaker_program"] == '"train.py"'  # the runtime's own keys (v3 sends none): JSON, as before
    assert plan.hyperparameters == EXPECTED


def test_every_host_gets_v3s_sm_hp_variables(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(hyperparameters={"learning-rate": 0.1, "x": "a b", "layers": [1, 2]},
                               hyperparameter_encoding=V3))
    for host in plan.hosts:
        assert {k: v for k, v in host.env.items() if k.startswith("SM_HP")} == {
            "SM_HP_LEARNING_RATE": "0.1", "SM_HP_X": "a b", "SM_HP_LAYERS": "[1, 2]",
            "SM_HPS": '{"learning-rate": 0.1, "x": "a b", "layers": [1, 2]}'}
        assert host.argv[-6:] == ["--learning-rate", "0.1", "--x", "a b", "--layers", "[1, 2]"]  # `--` and in order


def test_smp_v2_parameters_as_v3_sends_them(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="smp_v2", hyperparameter_encoding=V3,
                               mp_parameters={"tensor_parallel_degree": 4, "hybrid_shard_degree": 2}))
    assert plan.hosts[0].argv[-2:] == ["--mp_parameters", '{"tensor_parallel_degree": 4, "hybrid_shard_degree": 2}']
    assert plan.hosts[0].env["SM_HP_MP_PARAMETERS"] == '{"tensor_parallel_degree": 4, "hybrid_shard_degree": 2}'
    assert plan.sagemaker_hyperparameters["mp_parameters"] == plan.hosts[0].env["SM_HP_MP_PARAMETERS"]


def test_v2_plans_render_as_before(make_job: Callable[..., ResolvedJob]) -> None:
    v2 = build_plan(make_job(hyperparameters=EXPECTED))
    assert "hyperparameter_encoding" not in v2.to_dict()
    assert not [k for h in v2.hosts for k in h.env if k.startswith("SM_HP")]  # the toolkit sets them in the host
    v3 = _v3(make_job)
    assert v3.to_dict()["hyperparameter_encoding"] == "v3"
    assert LaunchPlan.from_json(v3.to_json(reveal_secrets=True)) == v3 and LaunchPlan.from_json(v2.to_json()) == v2


def test_secret_hyperparameters_stay_out_of_the_rendered_environment(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(hyperparameters={"hub_token": "s3cr3t", "lr": 0.1}, hyperparameter_encoding=V3))
    env = plan.to_dict()["hosts"][0]["env"]
    # SM_HPS keeps its order and other values: the runtime puts the secret back from hyperparameters.json
    assert env["SM_HPS"] == f'{{"hub_token": "{REDACTED}", "lr": 0.1}}'
    assert env["SM_HP_HUB_TOKEN"] == REDACTED and env["SM_HP_LR"] == "0.1"
    assert "s3cr3t" not in plan.to_json()
    assert json.loads(plan.hosts[0].env["SM_HPS"]) == {"hub_token": "s3cr3t", "lr": 0.1}  # the runtime's, unredacted


# v3's own code, in the official SDK v3's venv: what ModelTrainer sends (safe_serialize), what environment.py exports
# into sm_training.env (sourced by a shell, as sm_train.sh does) and what the drivers pass (hyperparameters_to_cli_args)
_V3_DRIVERS = """
import json, os, subprocess, sys, tempfile
from sagemaker.train.utils import safe_serialize
from sagemaker.train.container_drivers.common.utils import hyperparameters_to_cli_args
from sagemaker.train.container_drivers.scripts import environment

sent = {k: safe_serialize(v) for k, v in json.loads(sys.argv[1]).items()}
os.environ["TRAINING_JOB_NAME"] = "job"
out = os.path.join(tempfile.mkdtemp(), "sm_training.env")
environment.set_env(resource_config={"current_host": "algo-1", "current_instance_type": "ml.m5.xlarge",
                                     "hosts": ["algo-1"], "network_interface_name": "eth0"},
                    input_data_config={}, hyperparameters_config=json.loads(json.dumps(sent)), output_file=out)
dump = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('SM_HP')}))"
env = json.loads(subprocess.run(["bash", "-c", f". {out} && {sys.executable} -c \\"{dump}\\""], check=True,
                                capture_output=True, text=True).stdout)
print(json.dumps({"sent": sent, "env": env, "args": hyperparameters_to_cli_args(json.loads(env["SM_HPS"]))}))
"""
# values whose text or type changes on the way (JSON-looking strings, unicode, null, key order, `-` in keys)
TRICKY = {"epochs": 2, "learning-rate": 1e-05, "x": "1", "quoted": '"q"', "as_list": "[1, 2]", "flag": "true",
          "name": "héllo ✓", "none": None, "empty": "", "nested": {"b": [1, {"z": 1, "a": "é"}], "a": False},
          # names a shell refuses in sm_training.env's `export` lines: no SM_HP_* variable (SM_HPS and argv have them)
          "a.b": 1, "clé": 2, **EXPECTED}


def test_the_official_v3_drivers_make_the_same(make_job: Callable[..., ResolvedJob], sdk_v3_python: Path,
                                               tmp_path: Path) -> None:
    done = subprocess.run([str(sdk_v3_python), "-c", _V3_DRIVERS, json.dumps(TRICKY)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    plan = build_plan(make_job(strategy="single", instance_count=1, processes_per_host=1, hyperparameters=TRICKY,
                               hyperparameter_encoding=V3))
    host = plan.hosts[0]
    assert host.argv[2:] == theirs["args"]
    assert {k: v for k, v in host.env.items() if k.startswith("SM_HP")} == theirs["env"]
    assert {k: v for k, v in plan.sagemaker_hyperparameters.items() if not k.startswith("sagemaker_")} == \
        theirs["sent"]


# Secret values of every JSON type: the rendered plan holds them redacted, the host runtime puts them back from
# hyperparameters.json (merged from its environment in local mode); a v3 script must get v3's argument text
SECRETS = {"hub_token": True, "api_token": {"a": 1, "b": [1, "x"]}, "db_password": "NaN", "my_secret": None,
           "access_key": ["x", "y"], "auth_token": "true", "lr": 0.1}


def _host_runtime(plan: LaunchPlan, tmp_path: Path) -> Any:
    from smdist_launcher.container.runtime import HostRuntime
    from smdist_launcher.contract import write_host_config
    from smdist_launcher.contract.secrets import SECRET_HPS_ENV, encode_secret_env

    rendered = plan.to_dict()  # what the job folder holds: secrets redacted
    paths = write_host_config(tmp_path / "algo-1", rendered, "algo-1")
    (tmp_path / "plan.json").write_text(json.dumps(rendered))
    secrets = encode_secret_env(plan.sagemaker_hyperparameters)
    runtime = HostRuntime(paths.root, plan_path=tmp_path / "plan.json", host="algo-1", install=False,
                          environ={SECRET_HPS_ENV: secrets})
    runtime._merge_secret_hyperparameters()
    return runtime


@pytest.mark.parametrize("encoding", list(HyperparameterEncoding))
def test_the_runtime_restores_secret_arguments_in_the_jobs_encoding(make_job: Callable[..., ResolvedJob],
                                                                     tmp_path: Path,
                                                                     encoding: HyperparameterEncoding) -> None:
    plan = build_plan(make_job(strategy="single", instance_count=1, processes_per_host=1, hyperparameters=SECRETS,
                               hyperparameter_encoding=encoding))
    runtime = _host_runtime(plan, tmp_path)
    shown = runtime.host_plan["argv"]
    assert shown.count(REDACTED) == 6
    assert runtime._with_secrets(shown) == plan.hosts[0].argv
    if encoding is V3:  # v3's drivers: JSON text (before: the toolkit's `True`, `a=1,b=[1, 'x']`, `nan`, "")
        assert plan.hosts[0].argv[2:14] == ["--hub_token", "true", "--api_token", '{"a": 1, "b": [1, "x"]}',
                                            "--db_password", "NaN", "--my_secret", "null", "--access_key",
                                            '["x", "y"]', "--auth_token", "true"]


def test_the_runtime_gives_v3s_variables_on_any_backend(make_job: Callable[..., ResolvedJob], tmp_path: Path) -> None:
    """The host's environment as the runtime makes it from the rendered plan and hyperparameters.json only (Slurm
    and Kubernetes pass no SM_HPS of their own): v3's SM_HP_* and SM_HPS, secrets included, none of the toolkit's
    (`SM_HP_LEARNING-RATE`; `SM_HP_A=B`, a name no process can be given)."""
    from smdist_launcher.container.process_environment import process_env

    hps = {**SECRETS, "learning-rate": [1, 2], "a=b": 1, "x": "a b"}
    plan = build_plan(make_job(strategy="single", instance_count=1, processes_per_host=1, hyperparameters=hps,
                               hyperparameter_encoding=V3))
    runtime = _host_runtime(plan, tmp_path)
    env = process_env(runtime.paths, runtime.plan, runtime.host_plan, runtime.environ, {})
    planned = {k: v for k, v in plan.hosts[0].env.items() if k.startswith("SM_HP")}
    assert {k: v for k, v in env.items() if k.startswith("SM_HP")} == planned
    assert list(json.loads(env["SM_HPS"])) == list(hps) and json.loads(env["SM_HPS"])["hub_token"] is True
    assert "SM_HP_A=B" not in planned and planned["SM_HP_LEARNING_RATE"] == "[1, 2]"
