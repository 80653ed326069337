"""Runs under torchrun (2 ranks, CPU): the legacy init as AWS's tests/data/pytorch_ddp/mnist_pt.py calls it.

``init_process_group(backend="nccl", ...)`` must still join over smddp (this torch has no NCCL on CPU machines, and
on GPU plain NCCL would bypass smddp). Prints one "RESULT {json}" line on rank 0 for test_smddp_legacy.py.
"""
from __future__ import annotations

import json
import warnings
from datetime import timedelta

import smdistributed.dataparallel.torch.distributed as dist
import torch
import torch.distributed

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if dist.get_local_rank() == 0:
        dist.init_process_group(backend="nccl")  # exactly mnist_pt.py's call
    else:  # torch's positional order (backend, init_method, timeout, world_size, rank): all but timeout ignored
        dist.init_process_group("nccl", "tcp://203.0.113.1:1", timedelta(seconds=123), world_size=5, rank=4)
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
out = {"rank": dist.get_rank(), "backend": torch.distributed.get_backend(), "world": dist.get_world_size(),
       "sum": t.item(), "warnings": [str(w.message) for w in caught if "ignores its arguments" in str(w.message)]}
rows: list = [None, None]
dist.all_gather_object(rows, out)  # one printer: two ranks' lines would interleave
if out["rank"] == 0:
    for row in rows:
        print("RESULT " + json.dumps({"check": str(row["rank"]), **row}), flush=True)
dist.destroy_process_group()
