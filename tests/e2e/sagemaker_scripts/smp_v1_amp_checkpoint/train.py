"""Checkpoint and resume within one job: train, smp.save_checkpoint (partial and full), train on, then resume a fresh
model/optimizer with smp.resume_from_checkpoint and replay the same steps: the losses must repeat exactly.

Uses smp.amp.GradScaler for loss scaling (on CPU too), Adam (its state is tensor parallel), and
smp.set_activation_checkpointing on a block.
"""
import argparse
import json
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        self.block = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
        self.out = nn.Linear(32, 2)

    def forward(self, x):
        return self.out(self.block(F.relu(self.inp(x))))


@smp.step
def train_step(model, scaler, x, y):
    loss = F.mse_loss(model(x), y)
    model.backward(scaler.scale(loss))
    return loss


def build():
    torch.manual_seed(0)
    with smp.tensor_parallelism():
        net = Regressor()
    smp.set_activation_checkpointing(net.block, strategy="group_2")
    model = smp.DistributedModel(net)
    optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01))
    return model, optimizer, smp.amp.GradScaler(init_scale=1024.0, growth_interval=1)


def batches(n):
    g = torch.Generator().manual_seed(9)
    per = 8 // smp.dp_size()
    for _ in range(n):
        x, y = torch.randn(8, 8, generator=g), torch.randn(8, 2, generator=g)
        sl = slice(smp.dp_rank() * per, (smp.dp_rank() + 1) * per)
        yield x[sl], y[sl]


def run(model, optimizer, scaler, data):
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        loss = train_step(model, scaler, x, y).reduce_mean()
        scaler.step(optimizer)
        scaler.update()
        losses.append(sum(smp.allgather(loss.item(), smp.DP_GROUP)) / smp.dp_size())
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--steps-before", type=int, default=2)
    parser.add_argument("--steps-after", type=int, default=2)
    args, _ = parser.parse_known_args()
    torch.set_num_threads(1)
    smp.init()

    model, optimizer, scaler = build()
    data = list(batches(args.steps_before + args.steps_after))
    first = run(model, optimizer, scaler, data[:args.steps_before])
    assert scaler.get_scale() == 1024.0 * 2 ** args.steps_before  # no overflow: grows every step
    smp.save_checkpoint(args.checkpoint_dir, tag=f"step{args.steps_before}", partial=True, model=model,
                        optimizer=optimizer, user_content={"scaler": scaler.state_dict(), "step": args.steps_before},
                        num_kept_partial_checkpoints=1)
    smp.save_checkpoint(args.checkpoint_dir, tag="full_model.pt", partial=False, model=model)
    expected = run(model, optimizer, scaler, data[args.steps_before:])

    model, optimizer, scaler = build()  # a fresh start: different Adam state, scale 1024
    user_content = smp.resume_from_checkpoint(args.checkpoint_dir, tag=f"step{args.steps_before}", partial=True)
    scaler.load_state_dict(user_content["scaler"])
    assert user_content["step"] == args.steps_before
    resumed = run(model, optimizer, scaler, data[args.steps_before:])
    assert resumed == expected, (resumed, expected)

    full = torch.load(os.path.join(args.checkpoint_dir, "full_model.pt"))
    single = Regressor()
    single.load_state_dict(full)
    x, y = data[0]
    if smp.rank() == 0:
        print(f"resumed losses {resumed} repeat {expected}; "
              f"checkpoint files: {sorted(os.listdir(args.checkpoint_dir))}")
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"result-{smp.rank()}.json"), "w") as f:
        json.dump({"first": first, "expected": expected, "resumed": resumed,
                   "files": sorted(os.listdir(args.checkpoint_dir)),
                   "partial": sorted(os.listdir(os.path.join(args.checkpoint_dir,
                                                             f"step{args.steps_before}_partial")))},
                  f)
    smp.barrier()


if __name__ == "__main__":
    main()
