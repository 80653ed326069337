"""Fine-tune a GPT-2 checkpoint with SMP v1's distributed transformer.

The "pretrained" model is a small module with Hugging Face GPT-2's layout and parameter names (Conv1D weights stored
[in, out], fused c_attn), so its state dict is what GPT2LMHeadModel.state_dict() gives. The script translates it with
smp.nn.huggingface.gpt2.translate_hf_state_dict_to_smdistributed_gpt2, trains the smp model with tensor parallelism,
translates the result back with translate_state_dict_to_hf_gpt2 and asserts that both the losses and the final
Hugging Face weights equal fine-tuning the Hugging Face module itself in one process.
"""
import argparse
import json
import math
import os

import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn
import torch.nn.functional as F
from smdistributed.modelparallel.torch.nn.huggingface.gpt2 import (
    translate_hf_state_dict_to_smdistributed_gpt2,
    translate_state_dict_to_hf_gpt2,
)

VOCAB, POSITIONS, EMBD, HEADS, LAYERS = 40, 8, 16, 2, 2


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.05)
        self.bias = nn.Parameter(torch.randn(nf) * 0.01)

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = Conv1D(3 * EMBD, EMBD), Conv1D(EMBD, EMBD)
        self.register_buffer("bias", torch.tril(torch.ones(POSITIONS, POSITIONS, dtype=torch.bool)).view(1, 1,
                                                                                                         POSITIONS,
                                                                                                         POSITIONS))

    def forward(self, x):
        n, s, _ = x.shape
        q, k, v = (t.reshape(n, s, HEADS, EMBD // HEADS).transpose(1, 2) for t in self.c_attn(x).split(EMBD, dim=2))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(EMBD // HEADS)
        w = w.masked_fill(~self.bias[:, :, :s, :s], torch.finfo(w.dtype).min)
        a = torch.matmul(F.softmax(w, dim=-1), v).transpose(1, 2).reshape(n, s, EMBD)
        return self.c_proj(a)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(4 * EMBD, EMBD), Conv1D(EMBD, 4 * EMBD)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(EMBD), Attention(), nn.LayerNorm(EMBD), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(POSITIONS, EMBD)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(EMBD)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = GPT2Model()
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids, labels):
        logits = self.lm_head(self.transformer(ids))
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))


@smp.step
def train_step(model, ids):
    loss, _ = model((ids, None, None, None, ids))
    model.backward(loss)
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    args, _ = parser.parse_known_args()
    torch.set_num_threads(1)
    smp.init()

    torch.manual_seed(0)
    hf = GPT2LMHeadModel()  # the "pretrained" checkpoint
    pretrained = {k: v.clone() for k, v in hf.state_dict().items()}

    with smp.tensor_parallelism():
        lm = smp.nn.DistributedTransformerLMHead(
            num_layers=LAYERS, num_attention_heads=HEADS, attention_head_size=EMBD // HEADS, hidden_size=EMBD,
            intermediate_size=4 * EMBD, vocab_size=VOCAB, num_positions=POSITIONS, attention_dropout_prob=0.0,
            hidden_dropout_prob=0.0, causal_mask_size=POSITIONS, pre_layernorm=True, post_layernorm=True)
    model = smp.DistributedModel(lm)
    model.load_state_dict(translate_hf_state_dict_to_smdistributed_gpt2(pretrained))
    optimizer = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr))
    ref_opt = torch.optim.SGD(hf.parameters(), lr=args.lr)

    g = torch.Generator().manual_seed(3)
    per = 8 // smp.dp_size()
    losses = []
    for step in range(args.steps):
        ids = torch.randint(0, VOCAB, (8, POSITIONS), generator=g)
        optimizer.zero_grad()
        loss = train_step(model, ids[smp.dp_rank() * per:(smp.dp_rank() + 1) * per]).reduce_mean()
        optimizer.step()
        mean = sum(smp.allgather(loss.item(), smp.DP_GROUP)) / smp.dp_size()
        ref_opt.zero_grad()
        ref = hf(ids, ids)
        ref.backward()
        ref_opt.step()
        assert abs(mean - ref.item()) < 1e-4, (step, mean, ref.item())
        losses.append(mean)

    full = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in model.state_dict().items()}
    back = translate_state_dict_to_hf_gpt2(full, max_seq_len=POSITIONS)
    want = hf.state_dict()
    assert set(want) <= set(back), sorted(set(want) - set(back))  # back also has older GPT-2's attn.masked_bias
    diff = max((back[k].float() - want[k].float()).abs().max().item() for k in want)
    assert diff < 1e-4, diff
    if smp.rank() == 0:
        print(f"fine-tuned through smp.nn: losses {[round(x, 5) for x in losses]}, HF weights within {diff:.2e}")
        out = os.environ["SM_MODEL_DIR"]
        torch.save(back, os.path.join(out, "pytorch_model.bin"))
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump({"losses": losses, "max_weight_diff": diff}, f)
    smp.barrier()


if __name__ == "__main__":
    main()
