"""A heterogeneous cluster in local mode: a `data` group of 1 host and a `train` group of 2 hosts × 2 processes,
the distribution on `train`. The data host runs the script once, on its own; the train hosts form the world
(master algo-2, not algo-1); every host sees its own group in the toolkit's SM_* variables."""
from __future__ import annotations

import json
import tarfile

import pytest

from .conftest import PRELUDE

SCRIPT = r'''
env = json.loads(os.environ["SM_TRAINING_ENV"])
seen = {k: os.environ.get(k) for k in ("SM_CURRENT_HOST", "SM_CURRENT_INSTANCE_GROUP", "SM_CURRENT_INSTANCE_TYPE",
                                       "SM_CURRENT_INSTANCE_GROUP_HOSTS", "SM_IS_HETERO", "SM_INSTANCE_GROUPS",
                                       "SM_DISTRIBUTION_INSTANCE_GROUPS", "SM_HOSTS", "MASTER_ADDR")}
seen.update(master=env["master_hostname"], is_master=env["is_master"], distribution_hosts=env["distribution_hosts"])
if os.environ["SM_CURRENT_INSTANCE_GROUP"] == "train":
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    seen.update(rank=rank, world=world, sum=total.item())
    name = f"rank-{rank}"
    dist.barrier()
    dist.destroy_process_group()
else:
    name = "data-" + os.environ["SM_CURRENT_HOST"]
with open(os.path.join(os.environ["SM_MODEL_DIR"], name + ".json"), "w") as f:
    json.dump(seen, f)
print(f"{name} done", flush=True)
'''

DISTRIBUTIONS = {
    "torch_distributed": {"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
    "mpi": {"mpi": {"enabled": True, "processes_per_host": 2}},
}


@pytest.mark.parametrize("strategy", ["torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_distribution_on_one_group(ws, strategy):
    from smdist_launcher import PyTorch

    ws.src.mkdir()
    (ws.src / "train.py").write_text(PRELUDE + SCRIPT)
    groups = [{"instance_group_name": "data", "instance_type": "local", "instance_count": 1},
              {"instance_group_name": "train", "instance_type": "local", "instance_count": 2}]
    est = PyTorch(entry_point="train.py", source_dir=str(ws.src), instance_groups=groups, framework_version="2.3",
                  py_version="py311", distribution={**DISTRIBUTIONS[strategy], "instance_groups": ["train"]})
    plan = est.plan(job_name=f"e2e-hetero-{strategy.replace('_', '-')}")
    assert plan.master.host == "algo-2" and plan.world_size == 4
    record, error = ws.run(plan)
    assert error is None, error
    assert record["status"] == "Completed"
    with tarfile.open(ws.jobs / plan.job_name / "output" / "model.tar.gz") as tar:
        files = {m.name[:-5]: json.load(tar.extractfile(m)) for m in tar.getmembers()}
    assert sorted(files) == ["data-algo-1", "rank-0", "rank-1", "rank-2", "rank-3"]
    address = record["hosts"]["algo-2"]["address"]
    for name, seen in files.items():
        train = name.startswith("rank-")
        host = f"algo-{seen['rank'] // 2 + 2}" if train else "algo-1"
        assert seen["SM_CURRENT_HOST"] == host
        assert seen["SM_CURRENT_INSTANCE_GROUP"] == ("train" if train else "data")
        assert json.loads(seen["SM_CURRENT_INSTANCE_GROUP_HOSTS"]) == (["algo-2", "algo-3"] if train else ["algo-1"])
        assert seen["SM_CURRENT_INSTANCE_TYPE"] == "local"
        assert seen["SM_IS_HETERO"] == "true"
        assert json.loads(seen["SM_INSTANCE_GROUPS"]) == ["data", "train"]
        assert json.loads(seen["SM_DISTRIBUTION_INSTANCE_GROUPS"]) == ["train"]
        assert json.loads(seen["SM_HOSTS"]) == ["algo-1", "algo-2", "algo-3"]
        assert seen["master"] == "algo-2" and seen["is_master"] == (host == "algo-2")
        assert seen["distribution_hosts"] == ["algo-2", "algo-3"]
        assert seen["MASTER_ADDR"] == address
        if train:
            assert seen["world"] == 4 and seen["sum"] == 10.0
    assert "[algo-1] data-algo-1 done" in (ws.jobs / plan.job_name / "logs" / "algo-1.log").read_text()
