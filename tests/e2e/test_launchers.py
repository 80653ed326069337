"""2 simulated hosts x 2 processes, torchrun and mpirun: each rank sees its own host's SM_*
values and RANK/WORLD_SIZE, and an all_reduce across the hosts gives the right sum."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

RANK_CHECK = r'''
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
seen = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "SM_CURRENT_HOST", "SM_HOSTS", "SM_NUM_GPUS",
                                       "SM_CHANNEL_TRAINING", "SM_MODEL_DIR", "SM_HP_EPOCHS", "MASTER_ADDR")}
seen.update(rank=rank, world=world, sum=total.item(), argv=sys.argv[1:],
            data=open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "part.txt")).read())
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(seen, f)
print(f"rank {rank} of {world}: sum {total.item()}", flush=True)
dist.barrier()
dist.destroy_process_group()
'''


@pytest.mark.parametrize("strategy", ["torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_two_hosts_two_processes(ws, strategy):
    data = ws.root / "data"
    data.mkdir()
    (data / "part.txt").write_text("hello")
    plan = ws.plan(RANK_CHECK, strategy=strategy, hyperparameters={"epochs": 3}, inputs={"training": f"file://{data}"})
    record, error = ws.run(plan)
    assert error is None, error
    assert record["status"] == "Completed"
    assert record["model_data"].endswith("/output/model.tar.gz")
    with tarfile.open(ws.jobs / plan.job_name / "output" / "model.tar.gz") as tar:
        ranks = {int(m.name[5:-5]): json.load(tar.extractfile(m)) for m in tar.getmembers()}
    assert sorted(ranks) == [0, 1, 2, 3]
    addresses = {h: record["hosts"][h]["address"] for h in ("algo-1", "algo-2")}
    for rank, seen in ranks.items():
        host = f"algo-{rank // 2 + 1}"
        assert seen["rank"] == rank and int(seen["RANK"]) == rank
        assert seen["world"] == 4 and seen["WORLD_SIZE"] == "4"
        assert seen["sum"] == 10.0
        assert seen["SM_CURRENT_HOST"] == host
        assert json.loads(seen["SM_HOSTS"]) == ["algo-1", "algo-2"]
        assert seen["SM_NUM_GPUS"] == "0"
        assert seen["SM_HP_EPOCHS"] == "3" and seen["argv"] == ["--epochs", "3"]
        assert seen["SM_CHANNEL_TRAINING"] == str(_seen_root(ws.jobs / plan.job_name, host) / "input/data/training")
        assert seen["data"] == "hello"
        assert seen["MASTER_ADDR"] == addresses["algo-1"]
    log = (ws.jobs / plan.job_name / "logs" / "algo-2.log").read_text()
    assert "[algo-2 r3] rank 3 of 4: sum 10.0" in log


def _seen_root(job_dir: Path, host: str) -> Path:
    """The host's /opt/ml as its script sees it: /opt/ml where the runtime mounted the host's tree there (root: a
    private mount namespace), else the sandbox tree itself."""
    root = job_dir / "hosts" / host / "opt" / "ml"
    isolation = json.loads((root / "run" / "isolation.json").read_text())
    return Path("/opt/ml") if isolation["opt_ml"] else root


# AWS's toolkit tests launch MPI jobs through a shell entry point (test/resources/openmpi/launcher.sh); the toolkit runs
# it as `mpirun ... /bin/sh -c "./launcher.sh <args>"`.
LAUNCHER_SH = """#!/bin/sh
set -e
exec python rank.py "$@"
"""
RANK_PY = """import json, os, sys
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
seen = {k: v for k, v in os.environ.items() if k.startswith("SM_")}
seen.update(rank=rank, size=int(os.environ["OMPI_COMM_WORLD_SIZE"]), argv=sys.argv[1:],
            base_dir=os.environ.get("SAGEMAKER_BASE_DIR"), checkpoints=os.environ.get("SMDIST_CHECKPOINT_DIR"),
            pythonpath=os.environ["PYTHONPATH"].split(":")[0])
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(seen, f)
print(f"rank {rank} of {seen['size']} on {os.environ['SM_CURRENT_HOST']}", flush=True)
"""
NASTY = {"name": "$(touch pwned) it's \"q\" `id` $HOME", "mode": "python", "epochs": 2}


@pytest.mark.mpi
def test_shell_entry_point_under_mpirun_and_the_paths_its_ranks_see(ws):
    """A shell entry point runs under mpirun on every host (its arguments unchanged, never parsed by a shell), and
    every SM_* path names /opt/ml when the host's tree is mounted there for the ranks (else the sandbox tree)."""
    from smdist_launcher import PyTorch

    data = ws.root / "data"
    data.mkdir()
    (data / "part.txt").write_text("hello")
    ws.src.mkdir()
    (ws.src / "launcher.sh").write_text(LAUNCHER_SH)  # not executable: the runtime makes it so, as the toolkit does
    (ws.src / "rank.py").write_text(RANK_PY)
    est = PyTorch(entry_point="launcher.sh", source_dir=str(ws.src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", hyperparameters=NASTY,
                  distribution={"mpi": {"enabled": True, "processes_per_host": 1}})
    plan = est.plan({"training": f"file://{data}"}, job_name="e2e-mpi-shell")
    assert plan.hosts[0].argv[-10:] == ["/bin/sh", "-c", 'exec "$0" "$@"', "./launcher.sh",
                                        "--epochs", "2", "--mode", "python", "--name", NASTY["name"]]
    record, error = ws.run(plan)
    assert error is None, error
    assert record["status"] == "Completed"
    job = ws.jobs / plan.job_name
    for rank, host in enumerate(("algo-1", "algo-2")):
        root = _seen_root(job, host)
        seen = json.loads((job / "hosts" / host / "opt/ml/model" / f"rank-{rank}.json").read_text())
        assert (seen["rank"], seen["size"], seen["SM_CURRENT_HOST"]) == (rank, 2, host)
        assert seen["argv"] == ["--epochs", "2", "--mode", "python", "--name", NASTY["name"]]
        paths = {"SM_MODEL_DIR": "model", "SM_OUTPUT_DIR": "output", "SM_OUTPUT_DATA_DIR": "output/data",
                 "SM_OUTPUT_INTERMEDIATE_DIR": "output/intermediate", "SM_INPUT_DIR": "input",
                 "SM_INPUT_CONFIG_DIR": "input/config", "SM_CHANNEL_TRAINING": "input/data/training",
                 "SM_MODULE_DIR": "code"}
        assert {k: seen[k] for k in paths} == {k: str(root / v) for k, v in paths.items()}
        training_env = json.loads(seen["SM_TRAINING_ENV"])
        assert (training_env["model_dir"], training_env["module_dir"], training_env["output_data_dir"]) == (
            str(root / "model"), str(root / "code"), str(root / "output/data"))
        assert training_env["channel_input_dirs"] == {"training": str(root / "input/data/training")}
        assert seen["checkpoints"] == str(root / "checkpoints") and seen["pythonpath"] == str(root / "code")
        assert seen["base_dir"] == (None if root == Path("/opt/ml") else str(root))
    assert not (job / "hosts" / "algo-1" / "opt/ml/code/pwned").exists()
    log = (job / "logs" / "algo-2.log").read_text()
    assert "[algo-2 r1] rank 1 of 2 on algo-2" in log
