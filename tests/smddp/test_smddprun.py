"""smddprun: MPI rank variables -> torch.distributed env, argv untouched, under real mpirun."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.smddp.smddprun import SmddprunError, main, torch_env

OMPI = {
    "OMPI_COMM_WORLD_RANK": "5",
    "OMPI_COMM_WORLD_SIZE": "16",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
}


def test_open_mpi_variables_map_to_torch_names() -> None:
    env = torch_env({**OMPI, "SMDATAPARALLEL_SERVER_ADDR": "algo-1"})
    assert env == {
        "RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1", "MASTER_ADDR": "algo-1", "MASTER_PORT": "7592",
    }


def test_master_addr_falls_back_to_master_addr_then_first_sm_host() -> None:
    assert torch_env({**OMPI, "MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500"})["MASTER_ADDR"] == "10.0.0.2"
    env = torch_env({**OMPI, "SM_HOSTS": json.dumps(["algo-1", "algo-2"])})
    assert env["MASTER_ADDR"] == "algo-1"
    assert torch_env({**OMPI, "SMDDP_HOSTS": "algo-3:8,algo-4:8"})["MASTER_ADDR"] == "algo-3"


def test_single_node_job_needs_no_address() -> None:
    env = torch_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["LOCAL_RANK"] == "0"


@pytest.mark.parametrize(
    "env, message",
    [
        ({}, "cannot tell RANK.*under mpirun"),
        ({**OMPI}, "no rendezvous host.*SMDATAPARALLEL_SERVER_ADDR"),
        ({**OMPI, "OMPI_COMM_WORLD_RANK": "x"}, "RANK.*'x'.*non-negative integer"),
        ({**OMPI, "OMPI_COMM_WORLD_RANK": "16", "MASTER_ADDR": "h"}, "not below WORLD_SIZE"),
        ({**OMPI, "SM_HOSTS": "algo-1"}, "SM_HOSTS.*JSON list"),
    ],
)
def test_bad_environment_says_what_and_how_to_fix(env: dict, message: str) -> None:
    with pytest.raises(SmddprunError, match=message):
        torch_env(env)


def test_no_command_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: smddprun" in capsys.readouterr().err


def _smddprun_argv() -> list[str]:
    return [sys.executable, "-m", "smdist_launcher.smddp.smddprun"]


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")
def test_under_real_mpirun_each_rank_gets_its_env_and_argv_untouched(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os, sys\n"
        "keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT']\n"
        # one file per rank: mpirun forwards the ranks' stdout without keeping their lines whole
        "out = os.path.join(os.path.dirname(__file__), 'rank' + os.environ['RANK'] + '.json')\n"
        "open(out, 'w').write(json.dumps({'env': {k: os.environ.get(k) for k in keys}, 'argv': sys.argv[1:]}))\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH", "-x", "MASTER_PORT",
           *_smddprun_argv(), sys.executable, str(probe), "--lr", "0.1", "a b", "$HOME"]
    env = dict(os.environ, PYTHONPATH=src, MASTER_PORT="29555", OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert [r["env"]["RANK"] for r in reports] == ["0", "1"]
    for r in reports:
        assert r["env"]["WORLD_SIZE"] == "2" and r["env"]["LOCAL_WORLD_SIZE"] == "2"
        assert r["env"]["LOCAL_RANK"] == r["env"]["RANK"]
        assert r["env"]["MASTER_ADDR"] == "127.0.0.1" and r["env"]["MASTER_PORT"] == "29555"
        assert r["argv"] == ["--lr", "0.1", "a b", "$HOME"]
