"""A tiny GPT-style language model written with smp.nn, tensor parallel degree 2 across 4 ranks.

The model is smp.nn.DistributedTransformerLMHead plus a DistributedLinear probe; the script checks the SMP v1 rank
and group queries and the object communication API, then trains and asserts that the loss equals training the same
model in one process on the full batch.
"""
import argparse
import copy
import json
import os

import smdistributed.modelparallel
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn

VOCAB, HIDDEN, HEADS = 32, 16, 4


class LanguageModel(nn.Module):
    def __init__(self, seq_len):
        super().__init__()
        self.lm = smp.nn.DistributedTransformerLMHead(
            num_layers=2, num_attention_heads=HEADS, attention_head_size=HIDDEN // HEADS, hidden_size=HIDDEN,
            intermediate_size=4 * HIDDEN, vocab_size=VOCAB, num_positions=seq_len, attention_dropout_prob=0.0,
            hidden_dropout_prob=0.0, causal_mask_size=seq_len, pre_layernorm=True, post_layernorm=True,
            use_normal_initialization=True, initializer_range=0.05)
        self.probe = smp.nn.DistributedLinear(VOCAB, 4)

    def forward(self, input_ids, labels):
        loss, logits = self.lm((input_ids, None, None, None, labels))
        # a second head on the logits: DistributedLinear is nn.Linear split over the tp group
        aux = self.probe(logits).pow(2).mean()
        return loss + 0.01 * aux


@smp.step
def train_step(model, input_ids, labels):
    loss = model(input_ids, labels)
    model.backward(loss)
    return loss


def check_queries_and_comm():
    assert smdistributed.modelparallel.__version__.startswith("1.")
    assert smp.size() == 4 and smp.tp_size() == 2 and smp.pp_size() == 1 and smp.dp_size() == 4
    assert smp.rdp_size() == 2 and smp.mp_size() == 2 and smp.local_size() == 2
    assert smp.local_rank() == smp.rank() % 2
    tp_group, rdp_group = smp.get_tp_group(), smp.get_rdp_group()
    assert smp.rank() in tp_group and len(tp_group) == 2 and len(rdp_group) == 2
    assert smp.get_mp_group() == tp_group and sorted(smp.get_dp_group()) == [0, 1, 2, 3]
    assert smp.get_pp_group() == [smp.rank()] and smp.pp_rank() == 0 and smp.mp_rank() == smp.tp_rank()
    assert tp_group[smp.tp_rank()] == smp.rank() and rdp_group[smp.rdp_rank()] == smp.rank()
    # object communication: broadcast from world rank 0, send within the tp group, allgather over rdp
    if smp.rank() == 0:
        smp.broadcast({"from": 0}, smp.CommGroup.WORLD)
    else:
        assert smp.recv_from(0, smp.RankType.WORLD_RANK) == {"from": 0}
    if smp.tp_rank() == 0:
        smp.send(("hello", smp.rank()), 1, smp.RankType.TP_RANK)
    else:
        assert smp.recv_from(0, smp.RankType.TP_RANK) == ("hello", tp_group[0])
    assert smp.allgather(smp.rank(), smp.RDP_GROUP) == rdp_group
    smp.barrier(smp.TP_GROUP)
    smp.dp_barrier()
    smp.mp_barrier()
    smp.barrier()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.1)
    args, _ = parser.parse_known_args()  # SageMaker also passes --mp_parameters
    torch.set_num_threads(1)

    smp.init()
    if torch.cuda.is_available():
        torch.cuda.set_device(smp.local_rank())
    check_queries_and_comm()

    torch.manual_seed(0)
    net = LanguageModel(args.seq_len)
    reference = copy.deepcopy(net)
    model = smp.DistributedModel(net)
    optimizer = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr))
    ref_opt = torch.optim.SGD(reference.parameters(), lr=args.lr)
    distributed = [n for n, p in model.named_parameters() if model.is_distributed_parameter(p)]
    assert any(".query." in n for n in distributed) and any("probe" in n for n in distributed), distributed
    assert not any("word_embedding" in n for n in distributed)  # tied to the LM head: stays replicated

    g = torch.Generator().manual_seed(1)
    per = args.global_batch // smp.dp_size()
    losses, ref_losses = [], []
    tokens = torch.randint(0, VOCAB, (args.global_batch, args.seq_len), generator=g)  # one batch, memorised
    for step in range(args.steps):
        mine = tokens[smp.dp_rank() * per:(smp.dp_rank() + 1) * per]
        optimizer.zero_grad()
        loss = train_step(model, mine, mine).reduce_mean()
        optimizer.step()
        mean = sum(smp.allgather(loss.item(), smp.DP_GROUP)) / smp.dp_size()
        losses.append(mean)

        ref_opt.zero_grad()
        ref_loss = reference(tokens, tokens)
        ref_loss.backward()
        ref_opt.step()
        ref_losses.append(ref_loss.item())
        assert abs(mean - ref_loss.item()) < 1e-4, (step, mean, ref_loss.item())
        assert step == 0 or mean < losses[-2], losses  # it learns the batch
        if smp.rank() == 0:
            print(f"step {step}: loss {mean:.5f} (one-process reference {ref_loss.item():.5f})")

    out_dir = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
    with open(os.path.join(out_dir, f"result-{smp.rank()}.json"), "w") as f:
        json.dump({"rank": smp.rank(), "tp_rank": smp.tp_rank(), "losses": losses, "reference": ref_losses}, f)
    state = model.state_dict()  # full tensors are gathered: call on every rank
    full = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in state.items()}
    if smp.rank() == 0:
        torch.save(full, os.path.join(out_dir, "model.pt"))
    smp.barrier()


if __name__ == "__main__":
    main()
