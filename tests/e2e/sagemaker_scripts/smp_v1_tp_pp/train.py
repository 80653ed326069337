"""A token classifier of smp.nn transformer layers, split into 2 pipeline stages, each tensor parallel over 2 ranks.

Auto-partitioning cuts between the top-level children; the tensor-parallel linears inside each stage are split over
the tp group. Asserts the loss equals one-process training on the full batch.
"""
import argparse
import copy
import json
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, HEADS, CLASSES, SEQ = 24, 16, 2, 6, 6


class Layer(nn.Module):
    """One smp.nn transformer layer behind a tensor-in, tensor-out interface (no padding mask)."""

    def __init__(self):
        super().__init__()
        self.layer = smp.nn.DistributedTransformerLayer(
            num_attention_heads=HEADS, attention_head_size=HIDDEN // HEADS, hidden_size=HIDDEN,
            intermediate_size=2 * HIDDEN, attention_dropout_prob=0.0, hidden_dropout_prob=0.0, activation="relu")

    def forward(self, x):
        return self.layer((x, None))[0]


class TokenClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.block0 = Layer()
        self.block1 = Layer()
        self.head = smp.nn.DistributedLinear(HIDDEN, CLASSES)

    def forward(self, ids):
        return self.head(self.block1(self.block0(self.embed(ids))))


@smp.step
def train_step(model, ids, labels):
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, CLASSES), labels.reshape(-1))
    model.backward(loss)
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    args, _ = parser.parse_known_args()
    torch.set_num_threads(1)
    smp.init()
    assert (smp.pp_size(), smp.tp_size(), smp.rdp_size(), smp.dp_size()) == (2, 2, 1, 2)

    torch.manual_seed(0)
    net = TokenClassifier()
    reference = copy.deepcopy(net)
    model = smp.DistributedModel(net)
    optimizer = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr))
    ref_opt = torch.optim.SGD(reference.parameters(), lr=args.lr)

    g = torch.Generator().manual_seed(4)
    batch = 8
    per = batch // smp.dp_size()
    losses = []
    for step in range(args.steps):
        ids = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
        labels = torch.randint(0, CLASSES, (batch, SEQ), generator=g)
        sl = slice(smp.dp_rank() * per, (smp.dp_rank() + 1) * per)
        optimizer.zero_grad()
        loss = train_step(model, ids[sl], labels[sl]).reduce_mean().item()
        optimizer.step()
        mean = sum(smp.allgather(loss, smp.DP_GROUP)) / smp.dp_size()
        ref_opt.zero_grad()
        ref = F.cross_entropy(reference(ids).reshape(-1, CLASSES), labels.reshape(-1))
        ref.backward()
        ref_opt.step()
        assert abs(mean - ref.item()) < 1e-4, (step, mean, ref.item())
        losses.append(mean)
    distributed = [n for n, p in model.local_named_parameters() if model.is_distributed_parameter(p)]
    assert distributed, "each stage holds tensor-parallel parameters"
    if smp.rank() == 0:
        print(f"tp2 x pp2: losses {[round(v, 5) for v in losses]} equal the one-process reference")
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"result-{smp.rank()}.json"), "w") as f:
        json.dump({"rank": smp.rank(), "pp_rank": smp.pp_rank(), "tp_rank": smp.tp_rank(), "losses": losses,
                   "distributed": distributed}, f)
    smp.barrier()


if __name__ == "__main__":
    main()
