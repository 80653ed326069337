"""SMP v2 activation offloading the way SMP v2's example scripts enable it: FSDP (FULL_SHARD; SMP's
hybrid_shard_degree turns it into hybrid sharding), then activation checkpointing of every decoder layer
(reentrant checkpoint_wrapper), then, when tsm.state.sm_activation_offloading, PyTorch's offload_wrapper around
the model; SMP makes that wrapper prefetch activation_loading_horizon layers ahead. Losses must equal a
one-process reference without checkpointing or offloading."""
import argparse
import copy
import functools
import json
import os

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from model import CausalLM, DecoderLayer
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.grad_norm import clip_grad_norm_
from torch.sagemaker.logger import get_logger

parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=3)
parser.add_argument("--global_batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.3)
parser.add_argument("--activation_checkpointing", type=int, default=1)
parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args, _ = parser.parse_known_args()  # SageMaker also passes --mp_parameters
torch.set_num_threads(1)
logger = get_logger()

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
tsm.init()
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")

torch.manual_seed(1234)
model = CausalLM(layers=4)
ref = copy.deepcopy(model)
model = FSDP(model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                       transformer_layer_cls={DecoderLayer}),
             sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=device, use_orig_params=True,
             mixed_precision=MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.float32))
if args.activation_checkpointing > 0:
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, DecoderLayer),
                                   checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper,
                                                                           checkpoint_impl=CheckpointImpl.REENTRANT))
if tsm.state.sm_activation_offloading > 0:
    model = offload_wrapper(model)
    if rank == 0:
        logger.info("activation offloading on, loading horizon %d", tsm.state.activation_loading_horizon)
assert model.sharding_strategy == ShardingStrategy.HYBRID_SHARD  # hybrid_shard_degree 2 of 4 ranks

g = torch.Generator().manual_seed(7)
data = [torch.randint(0, 64, (args.global_batch, args.seq), generator=g) for _ in range(args.max_steps)]
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
ref_opt = torch.optim.SGD(ref.parameters(), lr=args.lr)
per = args.global_batch // world
losses, ref_losses = [], []
for tokens in data:
    mine = tokens[rank * per:(rank + 1) * per].to(device)
    loss = model(input_ids=mine, labels=mine)["loss"]
    loss.backward()
    clip_grad_norm_(model, 100.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    avg = loss.detach().clone()
    dist.all_reduce(avg)
    losses.append(avg.item() / world)

    ref_loss = ref(input_ids=tokens, labels=tokens)["loss"]
    ref_loss.backward()
    ref_opt.step()
    ref_opt.zero_grad()
    ref_losses.append(ref_loss.item())

torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-6)
with open(os.path.join(args.model_dir, f"result-{rank}.json"), "w") as fh:
    json.dump({"losses": losses, "ref_losses": ref_losses,
               "offloading": bool(tsm.state.sm_activation_offloading),
               "horizon": tsm.state.activation_loading_horizon}, fh)
dist.barrier()
del model, opt
dist.destroy_process_group()
