"""An MNIST-shaped CNN split into 2 pipeline partitions by hand (smp.partition), 4 microbatches, 2 replicas.

Asserts the pipelined, data-parallel loss equals training the same network in one process on the full batch, and that
each rank holds only its partition's parameters.
"""
import argparse
import copy
import json
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)           # default_partition (0)
        self.conv2 = nn.Conv2d(4, 8, 3)
        with smp.partition(1):
            self.fc1 = nn.Linear(8 * 5 * 5, 32)
            self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


@smp.step
def train_step(model, data, target):
    output = model(data)
    loss = F.nll_loss(output, target)
    model.backward(loss)
    return output, loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    args, _ = parser.parse_known_args()
    torch.set_num_threads(1)
    smp.init()
    assert smp.pp_size() == 2 and smp.dp_size() == 2 and smp.get_pp_group() == smp.get_mp_group()

    torch.manual_seed(0)
    net = Net()
    reference = copy.deepcopy(net)
    model = smp.DistributedModel(net)
    hooked = []
    model.register_post_partition_hook(lambda m, opt: hooked.append(m.partitioned))
    optimizer = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr))
    ref_opt = torch.optim.SGD(reference.parameters(), lr=args.lr)

    g = torch.Generator().manual_seed(2)
    per = args.batch_size // smp.dp_size()
    losses = []
    for step in range(args.steps):
        x = torch.randn(args.batch_size, 1, 14, 14, generator=g)
        y = torch.randint(0, 10, (args.batch_size,), generator=g)
        sl = slice(smp.dp_rank() * per, (smp.dp_rank() + 1) * per)
        optimizer.zero_grad()
        outputs, loss_mb = train_step(model, x[sl], y[sl])
        optimizer.step()
        loss = loss_mb.reduce_mean().item()
        assert outputs.concat().shape == (per, 10)
        mean = sum(smp.allgather(loss, smp.DP_GROUP)) / smp.dp_size()
        ref_opt.zero_grad()
        ref = F.nll_loss(reference(x), y)
        ref.backward()
        ref_opt.step()
        assert abs(mean - ref.item()) < 1e-5, (step, mean, ref.item())
        losses.append(mean)
    assert hooked == [True], hooked
    names = [n for n, _ in model.local_named_parameters()]
    own = ("conv" if smp.pp_rank() == 0 else "fc")
    assert names and all(own in n for n in names), names
    if smp.rank() == 0:
        print(f"pipeline (manual partitions): losses {[round(v, 5) for v in losses]} equal the one-process reference")
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"result-{smp.rank()}.json"), "w") as f:
        json.dump({"rank": smp.rank(), "pp_rank": smp.pp_rank(), "params": names, "losses": losses}, f)
    smp.barrier()


if __name__ == "__main__":
    main()
