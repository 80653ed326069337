"""Sharded data parallelism (SMP v1): the model is created under smp.model_creation with delayed parameter
initialization, wrapped, and trained with an AdamW DistributedOptimizer over 4 data-parallel ranks.

The runtime accepts sharded_data_parallel_degree with a warning (replicas are kept whole); the script asserts that
the loss equals one-process training on the full batch from the same initial weights.
"""
import argparse
import json
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model():
    return nn.Sequential(nn.Embedding(20, 16), nn.Flatten(), nn.Linear(16 * 4, 32), nn.GELU(), nn.Linear(32, 3))


@smp.step
def train_step(model, ids, labels):
    loss = F.cross_entropy(model(ids), labels)
    model.backward(loss)
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args, _ = parser.parse_known_args()
    torch.set_num_threads(1)
    smp.init()
    assert smp.dp_size() == 4 and smp.tp_size() == 1

    with smp.model_creation(tensor_parallelism=False, dtype=torch.float32, delayed_param_initialization=True):
        net = make_model()
    assert all(p.is_meta for p in net.parameters())  # nothing allocated yet
    model = smp.DistributedModel(net)
    assert not any(p.is_meta for p in model.parameters())
    reference = make_model()
    reference.load_state_dict({k.removeprefix("module."): v for k, v in model.state_dict().items()})
    optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=0.01))
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(6)
    per = 8 // smp.dp_size()
    losses = []
    for step in range(args.steps):
        ids, labels = torch.randint(0, 20, (8, 4), generator=g), torch.randint(0, 3, (8,), generator=g)
        sl = slice(smp.dp_rank() * per, (smp.dp_rank() + 1) * per)
        optimizer.zero_grad()
        loss = train_step(model, ids[sl], labels[sl]).reduce_mean().item()
        optimizer.step()
        mean = sum(smp.allgather(loss, smp.DP_GROUP)) / smp.dp_size()
        ref_opt.zero_grad()
        ref = F.cross_entropy(reference(ids), labels)
        ref.backward()
        ref_opt.step()
        assert abs(mean - ref.item()) < 1e-5, (step, mean, ref.item())
        losses.append(mean)
    if smp.rank() == 0:
        print(f"sharded data parallel config: losses {[round(v, 5) for v in losses]} equal the one-process reference")
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"result-{smp.rank()}.json"), "w") as f:
        json.dump({"rank": smp.rank(), "losses": losses}, f)
    smp.barrier()


if __name__ == "__main__":
    main()
