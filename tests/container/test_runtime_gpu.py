"""local_gpu shape: 2 simulated hosts, each given its own GPUs, NCCL across them (skips without 2 GPUs)."""
from __future__ import annotations

import json

import pytest

from .hostjobs import make_plan

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                 reason="needs 2 CUDA GPUs")]

NCCL_ALLREDUCE = """
import json, os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
t = torch.tensor([float(rank + 1)], device="cuda")
dist.all_reduce(t)
out = {"rank": rank, "sum": t.item(), "host": os.environ["SM_CURRENT_HOST"], "gpus": os.environ["SM_NUM_GPUS"],
       "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": torch.cuda.get_device_name()}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank{rank}.json"), "w") as f:
    json.dump(out, f)
dist.destroy_process_group()
"""


def test_torchrun_nccl_two_hosts(make_job):
    per_host = max(1, min(2, torch.cuda.device_count() // 2))
    plan = make_plan("torchrun", ppn=per_host)
    job = make_job(plan, NCCL_ALLREDUCE)
    gpus = {h: ",".join(str(i * per_host + k) for k in range(per_host)) for i, h in enumerate(job.names)}
    job.start({"SMDIST_NUM_GPUS": ""}, {h: {"CUDA_VISIBLE_DEVICES": g} for h, g in gpus.items()})
    outputs = job.wait(timeout=240)
    for code, text in outputs.values():
        print(text)
        assert code == 0, text
    world = 2 * per_host
    for i, host in enumerate(job.names):
        for rank in range(i * per_host, (i + 1) * per_host):
            r = json.loads((job.roots[host] / "output" / "data" / f"rank{rank}.json").read_text())
            assert (r["rank"], r["host"], r["sum"], r["gpus"]) == (rank, host, world * (world + 1) / 2, str(per_host))
            assert r["visible"] == gpus[host]
