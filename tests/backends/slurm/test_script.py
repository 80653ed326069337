"""The sbatch script is a pure function of the plan and the Slurm options: pinned for every example, free of user
data, valid bash; options are validated before anything is submitted."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.backends.slurm.options import slurm_options
from smdist_launcher.backends.slurm.script import sbatch_directives, sbatch_script, slurm_time
from smdist_launcher.cli.main import main
from smdist_launcher.errors import ValidationError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PINNED = sorted(p.parents[1].name for p in EXAMPLES.glob("*/plans/job.json"))


@pytest.mark.parametrize("name", PINNED)
def test_every_example_has_its_sbatch_script_pinned(name, capsys):
    example = EXAMPLES / name
    code = main(["plan", str(example / "job.yaml"), "--slurm", "--check", str(example / "plans" / "job.sbatch")])
    assert code == 0, capsys.readouterr().out
    subprocess.run(["bash", "-n", str(example / "plans" / "job.sbatch")], check=True, timeout=30)


def _plan(instance_type: str = "local", **kwargs):
    est = PyTorch(entry_point=str(EXAMPLES / "torch_distributed" / "train.py"), instance_type=instance_type,
                  instance_count=3, framework_version="2.3",
                  py_version="py311", distribution={"torch_distributed": {"enabled": True}},
                  role="arn:aws:iam::111122223333:role/Train", **kwargs)
    return est.plan(job_name="slurm-unit")


def test_directives_follow_the_plan_and_the_options():
    plan = _plan(max_run=3 * 3600 + 1)
    assert sbatch_directives(plan, slurm_options()) == [
        "--job-name=slurm-unit", "--nodes=3", "--ntasks-per-node=1", "--exclusive", "--time=0-03:01:00"]
    chosen = slurm_options({"partition": "gpu", "account": "ml-team", "time": "2:00:00", "gpus_per_node": 4})
    assert sbatch_directives(plan, chosen)[4:] == [
        "--time=2:00:00", "--partition=gpu", "--account=ml-team", "--gpus-per-node=4"]
    assert slurm_time(86400) == "1-00:00:00" and slurm_time(1) == "0-00:01:00"


def test_gpus_per_node_come_from_the_instance_type():
    assert "--gpus-per-node=8" in sbatch_directives(_plan("ml.p4d.24xlarge"), slurm_options())
    assert not any(d.startswith("--gpus") for d in sbatch_directives(_plan("ml.c5.18xlarge"), slurm_options()))
    assert not any(d.startswith("--gpus") for d in sbatch_directives(_plan("local"), slurm_options()))


def test_the_script_carries_no_user_data():
    plan = _plan(hyperparameters={"hub_token": "hf_sekret", "evil": "$(touch /tmp/pwned)"},
                 environment={"WANDB_API_KEY": "k-sekret"})
    script = sbatch_script(plan)
    for value in ("hf_sekret", "$(touch", "k-sekret", "evil"):
        assert value not in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True, timeout=30)


def test_bad_options_name_the_key_and_what_is_allowed():
    with pytest.raises(ValidationError) as bad:
        slurm_options({"time": "two hours", "partition": "a b", "gpus_per_node": -1, "nodes": 3})
    paths = {e.path for e in bad.value.errors}
    assert paths == {"slurm.time", "slurm.partition", "slurm.gpus_per_node", "slurm.nodes"}
    assert "D-HH:MM:SS" in str(bad.value)


def test_slurm_flags_without_the_slurm_backend_are_refused(capsys):
    job = EXAMPLES / "torch_distributed" / "job.yaml"
    assert main(["run", str(job), "--partition", "gpu", "--instance-type", "local"]) == 2
    assert "--partition: only used with --backend slurm" in capsys.readouterr().err
