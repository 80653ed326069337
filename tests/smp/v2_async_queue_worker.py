"""Runs under torchrun (2 ranks, gloo): async checkpoints the way AWS's SMP v2 shared-scripts write them.

train_lib.py makes ``AsyncCallsQueue()``; checkpoints.py calls ``queue.maybe_finalize_async_calls(blocking=True,
process_group=pg)`` before each save and ``async_save(state_dict, checkpoint_id=..., process_group=pg,
coordinator_rank=..., queue=queue)``; train_lib.py finalizes once more at the end. Here with a
``PyTorchDistSaveShardedStrategy(thread_count=3)`` for the second save. argv[1]: a folder every rank shares.
Prints "RESULT {json}" from rank 0.
"""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.sagemaker.distributed.checkpoint.async_utils import AsyncCallsQueue
from torch.sagemaker.distributed.checkpoint.state_dict_loader import load
from torch.sagemaker.distributed.checkpoint.state_dict_saver import PyTorchDistSaveShardedStrategy, async_save

dist.init_process_group("gloo")
rank = dist.get_rank()
root = sys.argv[1]
pg = dist.new_group([0, 1])
queue = AsyncCallsQueue()
out: dict = {}


def state(step: int) -> dict[str, torch.Tensor]:
    # keys of its own per rank: DCP keeps one copy of a plain tensor every rank has under the same key
    return {f"rank{rank}.w{i}": torch.full((4, 3), float(step * 10 + i + rank)) for i in range(4)}


indices = []
for step, strategy in ((1, None), (2, PyTorchDistSaveShardedStrategy(thread_count=3))):
    indices += queue.maybe_finalize_async_calls(blocking=True, process_group=pg)  # wait for the previous one
    future = async_save(state(step), checkpoint_id=os.path.join(root, f"step{step}"), process_group=pg,
                        coordinator_rank=0, queue=queue, sharded_strategy=strategy)
    out.setdefault("unfinalized_after_save", []).append(queue.get_num_unfinalized_calls())
    # non-blocking with a group: the ranks agree on how many calls are done (a collective), so it never hangs
    indices += queue.maybe_finalize_async_calls(blocking=False, process_group=pg)
indices += queue.maybe_finalize_async_calls(blocking=True, process_group=pg)  # train_lib.py's last call
queue.close()
out["finalized"] = indices
out["left"] = queue.get_num_unfinalized_calls()
for step in (1, 2):
    files = sorted(os.listdir(os.path.join(root, f"step{step}")))
    out[f"files{step}"] = [f for f in files if f.endswith(".distcp")]
    back = {k: torch.zeros_like(v) for k, v in state(step).items()}
    load(back, checkpoint_id=os.path.join(root, f"step{step}"), process_group=pg)
    out[f"exact{step}"] = all(torch.equal(back[k], v) for k, v in state(step).items())
rows: list = [None, None]
dist.all_gather_object(rows, out)
if rank == 0:
    print("RESULT " + json.dumps({"check": "queue", "ranks": rows}), flush=True)
dist.destroy_process_group()
