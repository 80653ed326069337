"""SMP v2 script: tsm.init -> delayed init -> tsm.transform (TP) -> AC -> FSDP2 (HSDP) -> train -> DCP checkpoint.

Parameters come from the launcher (mp_parameters / $SM_HP_MP_PARAMETERS), e.g.
{"tensor_parallel_degree": 2, "hybrid_shard_degree": 1, "sm_activation_offloading": true, "activation_loading_horizon": 2}
Small GPT-style model on random tokens; runs on CPU (gloo) or GPUs (nccl).
"""
import os

import torch
import torch.sagemaker as tsm
from torch.sagemaker import checkpoint as tsm_checkpoint  # DCP save/load across layouts

from smdist_launcher.smp.reference_models import GPT, GPTConfig, lm_loss

STEPS, BATCH, SEQ = 4, 8, 16
cfg = GPTConfig(dim=64, n_layers=4, n_heads=4, vocab_size=256)


def main() -> None:
    # A function, not module globals: the sharded model holds the process groups, and they must be freed
    # (smp's exit hook destroys and collects them) before the interpreter shuts down (pytorch#190489).
    tsm.init()
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(tsm.state.cfg.random_seed or 0)

    with tsm.init_empty_weights():
        model = GPT(cfg)
    model = tsm.transform(model)
    tsm.apply_activation_checkpointing(model)
    if tsm.state.cfg.sm_activation_offloading and tsm.state.tp_size == 1:
        # Offloads what un-checkpointed blocks save; with every block checkpointed there is little left to move.
        tsm.apply_activation_offloading(model, horizon=tsm.state.cfg.activation_loading_horizon)
    tsm.shard_model(model)
    tsm.materialize(model, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    per_rank = BATCH // tsm.state.dp_size
    g = torch.Generator().manual_seed(1234)
    for step in range(STEPS):
        tokens = torch.randint(0, cfg.vocab_size, (BATCH, SEQ + 1), generator=g)
        mine = tokens[tsm.state.dp_rank * per_rank:(tsm.state.dp_rank + 1) * per_rank].to(device)
        loss = lm_loss(model(mine[:, :-1]), mine[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if tsm.state.rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    out_dir = os.environ.get("SM_MODEL_DIR", "/tmp/smp_v2_example")
    tsm_checkpoint.save_model(os.path.join(out_dir, "checkpoint"), model, optimizer, extra={"step": STEPS})
    if tsm.state.rank == 0:
        print(f"saved a DCP checkpoint to {out_dir}/checkpoint", flush=True)


if __name__ == "__main__":
    main()
