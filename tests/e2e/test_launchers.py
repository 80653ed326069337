"""2 simulated hosts x 2 processes, torchrun and mpirun: each rank sees its own host's SM_*
values and RANK/WORLD_SIZE, and an all_reduce across the hosts gives the right sum."""
from __future__ import annotations

import json
import tarfile

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
        assert seen["SM_CHANNEL_TRAINING"] == str(ws.jobs / plan.job_name / "hosts" / host
                                                  / "opt/ml/input/data/training")
        assert seen["data"] == "hello"
        assert seen["MASTER_ADDR"] == addresses["algo-1"]
    log = (ws.jobs / plan.job_name / "logs" / "algo-2.log").read_text()
    assert "[algo-2 r3] rank 3 of 4: sum 10.0" in log
