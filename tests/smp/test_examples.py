"""The example scripts (the seed's v1 scripts, a v2 script) run through torchrun and mpirun on CPU. v1_tp.py takes
its ranks from Open MPI here and from the launcher's mpirun in e2e/test_runtime_scripts; v1_tp_pp.py takes them
from torchrun."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from .multiprocess import REPO, SITE, torchrun

pytestmark = pytest.mark.slow
EXAMPLES = REPO / "examples" / "smp"
SEED_TP = {"pipeline_parallel_degree": 1, "placement_strategy": "cluster", "tensor_parallel_degree": 2, "ddp": True}
SEED_TP_PP = {"microbatches": 4, "pipeline_parallel_degree": 2, "placement_strategy": "cluster",
              "tensor_parallel_degree": 2, "ddp": True}


def losses(output: str) -> list[float]:
    return [float(line.split()[-1]) for line in output.splitlines() if line.startswith("step ")]


def test_v1_tensor_and_pipeline_parallel_seed_script_torchrun() -> None:
    _, out = torchrun(EXAMPLES / "v1_tp_pp.py", 4, env={"SM_HP_MP_PARAMETERS": json.dumps(SEED_TP_PP)})
    assert len(losses(out)) == 3


def test_v2_script_torchrun(tmp_path) -> None:
    params = {"tensor_parallel_degree": 2, "hybrid_shard_degree": 1, "activation_loading_horizon": 2}
    _, out = torchrun(EXAMPLES / "v2_train.py", 4, env={"SM_HP_MP_PARAMETERS": json.dumps(params),
                                                        "SM_MODEL_DIR": str(tmp_path)})
    assert len(losses(out)) == 4
    assert (tmp_path / "checkpoint" / ".metadata").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI's mpirun is not installed")
def test_v1_seed_script_under_mpirun_takes_ranks_from_ompi() -> None:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1",
           "SM_HP_MP_PARAMETERS": json.dumps(SEED_TP), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(SITE)])}
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--bind-to", "none",
           "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "SM_HP_MP_PARAMETERS", "-x", "PYTHONPATH",
           "-x", "OMP_NUM_THREADS", "-x", "PYTHONUNBUFFERED", sys.executable, str(EXAMPLES / "v1_tp.py")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(losses(proc.stdout)) == 4
