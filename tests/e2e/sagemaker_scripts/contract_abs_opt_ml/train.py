"""Absolute /opt/ml paths, as many SageMaker scripts hard-code them: the model under /opt/ml/model (also given as
a hyperparameter), checkpoints under /opt/ml/checkpoints, extra output under /opt/ml/output/data, and the job's
own description read from /opt/ml/input/config. Every simulated host must see its own /opt/ml."""
import argparse
import json
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default="/opt/ml/model")
parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
with open("/opt/ml/input/config/resourceconfig.json") as f:
    resource = json.load(f)
host = resource["current_host"]
assert host == os.environ["SM_CURRENT_HOST"], (host, os.environ["SM_CURRENT_HOST"])
with open("/opt/ml/input/config/hyperparameters.json") as f:
    assert "model-dir" in json.load(f)  # this job's hyperparameters, not another job's

os.makedirs(args.checkpoint_dir, exist_ok=True)
with open(os.path.join(args.checkpoint_dir, f"ckpt-{host}-rank{rank}.pt"), "wb") as f:
    torch.save({"rank": rank, "host": host}, f)
dist.barrier()
# Every rank of this host sees exactly its host's checkpoints, never the other host's.
mine = sorted(os.listdir(args.checkpoint_dir))
assert all(name.startswith(f"ckpt-{host}-") for name in mine), mine
assert len(mine) == int(os.environ["LOCAL_WORLD_SIZE"]), mine

if local_rank == 0:
    os.makedirs(args.model_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, f"x-{host}"), "w") as f:
        f.write(host)
    with open("/opt/ml/model/x", "w") as f:  # the same name on every host: each host's own file
        f.write(host)
    os.makedirs("/opt/ml/output/data", exist_ok=True)
    with open(f"/opt/ml/output/data/out-{host}.json", "w") as f:
        json.dump({"host": host, "checkpoints": mine}, f)
dist.barrier()
if local_rank == 0:
    assert sorted(os.listdir("/opt/ml/model")) == ["x", f"x-{host}"], os.listdir("/opt/ml/model")
    with open("/opt/ml/model/x") as f:
        assert f.read() == host
print(f"{host} rank {rank}: /opt/ml is this host's own", flush=True)
dist.destroy_process_group()
