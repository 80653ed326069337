"""Runs under torchrun (2 ranks, gloo): smp.tp_register replacement and the p2p object API. RESULT lines on rank 0."""
from __future__ import annotations

import json

import torch
import torch.distributed as dist
from torch import nn

import smdist_launcher.smp.v1 as smp


class MyBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


smp.tp_register_with_module(
    MyBlock, smp.nn.DistributedTransformerLayer,
    init_hook=lambda width, heads: ((), dict(num_attention_heads=heads, attention_head_size=width // heads,
                                             hidden_size=width, intermediate_size=2 * width,
                                             attention_dropout_prob=0.0, hidden_dropout_prob=0.0)),
    forward_hook=lambda x: (((x, None),), {}),
    return_hook=lambda out: out[0])


def main() -> None:
    smp.init({"tensor_parallel_degree": 2, "ddp": True})
    with smp.tensor_parallelism():
        net = nn.Sequential(MyBlock(8, 2), nn.Linear(8, 1))
    plain = MyBlock(8, 2)  # created outside the context: not replaced
    model = smp.DistributedModel(net)
    inner = model.module[0].module
    out = model(torch.randn(3, 4, 8)).sum()
    out.backward()
    replaced = isinstance(inner, smp.nn.DistributedTransformerLayer)
    split = sorted(n for n, p in model.named_parameters() if model.is_distributed_parameter(p))
    # send and broadcast both reach recv_from
    if smp.rank() == 0:
        smp.send({"n": 1}, 1)
        smp.broadcast([2], smp.TP_GROUP)
        got = None
    else:
        got = [smp.recv_from(0), smp.recv_from(0, smp.RankType.TP_RANK)]
    got = smp.allgather(got, smp.WORLD)[1]
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({"check": "api", "replaced": replaced, "split": split, "got": got,
                                      "plain_kept": type(plain).__name__}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
