"""SMP v2 with PyTorch FSDP and hybrid sharding, the way SMP v2's example scripts train:
tsm.init -> model on the meta device -> DelayedParamIniter -> FSDP(HYBRID_SHARD, transformer auto-wrap,
param_init_fn) -> SMP's clip_grad_norm_ -> sharded checkpoint through torch.sagemaker.distributed.fsdp.checkpoint,
resumed into a fresh model -> full checkpoint into SM_MODEL_DIR.
The losses must equal a one-process reference trained on the whole batch from the same initial weights."""
import argparse
import functools
import json
import os

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
import torch.sagemaker.checkpoint.utils as tsm_checkpoint
from model import CausalLM, DecoderLayer
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, StateDictType
from torch.distributed.fsdp.api import FullStateDictConfig
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker.delayed_param import DelayedParamIniter
from torch.sagemaker.distributed.fsdp import checkpoint as tsm_fsdp_checkpoint
from torch.sagemaker.grad_norm import clip_grad_norm_
from torch.sagemaker.utils import utils as tsm_utils
from torch.sagemaker.utils.process_group_utils import get_global_ranks

parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=4)
parser.add_argument("--resume_at", type=int, default=2)
parser.add_argument("--global_batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=12)
parser.add_argument("--lr", type=float, default=0.3)
parser.add_argument("--grad_clip", type=float, default=0.5)
parser.add_argument("--sharding_strategy", default="hybrid_shard")
parser.add_argument("--checkpoint_dir", default="/opt/ml/checkpoints")
parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args, _ = parser.parse_known_args()  # SageMaker also passes --mp_parameters
torch.set_num_threads(1)

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
tsm.init()
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def batches():
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, 64, (args.global_batch, args.seq), generator=g) for _ in range(args.max_steps)]


def build():
    torch.manual_seed(1234)  # every rank materializes the same values
    with torch.device("meta"):
        model = CausalLM()
    initer = DelayedParamIniter(model)
    with initer.validate_params_and_buffers_inited(), tsm_utils.timeit(True, "FSDP constructor", rank):
        model = FSDP(model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                               transformer_layer_cls={DecoderLayer}),
                     sharding_strategy=getattr(ShardingStrategy, args.sharding_strategy.upper()),
                     device_id=device, use_orig_params=True,
                     param_init_fn=initer.get_param_init_fn(), post_param_init_fn=initer.get_post_param_init_fn())
    return model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)


def full_state(model):
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
        return {k: v.clone() for k, v in model.state_dict().items()}


def step(model, opt, tokens):
    per = args.global_batch // world  # TP is 1: every rank is a data-parallel rank
    mine = tokens[rank * per:(rank + 1) * per].to(device)
    loss = model(input_ids=mine, labels=mine)["loss"]
    loss.backward()
    norm = clip_grad_norm_(model, args.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    avg = loss.detach().clone()
    dist.all_reduce(avg)
    return avg.item() / world, float(norm)


model, opt = build()
pg = model.process_group
assert dist.get_world_size(pg) == tsm.state.hybrid_shard_degree, "FSDP must shard over hybrid_shard_degree ranks"
assert model.sharding_strategy == ShardingStrategy.HYBRID_SHARD
initial = full_state(model)

# One-process reference on the whole batch from the same initial weights.
ref = CausalLM()
ref.load_state_dict(initial)
ref_opt = torch.optim.SGD(ref.parameters(), lr=args.lr, momentum=0.9)
ref_losses, ref_norms = [], []
for tokens in batches():
    loss = ref(input_ids=tokens, labels=tokens)["loss"]
    loss.backward()
    ref_norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), args.grad_clip)))
    ref_opt.step()
    ref_opt.zero_grad()
    ref_losses.append(loss.item())

losses, norms = [], []
# On a shared file system (FSx) only the first replica writes (rep rank 0); /opt/ml/checkpoints is per host here
# and a shard group lives on one host, so every replica writes its own host's copy.
shared_fs = args.checkpoint_dir != "/opt/ml/checkpoints"
metadata = (pg, min(get_global_ranks(pg)), tsm.state.ranker.get_rep_rank(rank) == 0 or not shared_fs)
for i, tokens in enumerate(batches()):
    if i == args.resume_at:
        subdir = f"tiny-{i}steps"
        save_dir = os.path.join(args.checkpoint_dir, subdir)
        tsm_fsdp_checkpoint.save_model_checkpoint(model, StateDictType.SHARDED_STATE_DICT, save_dir,
                                                  model.sharding_strategy, metadata, log=rank == 0, optimizer=opt,
                                                  extra_exports={"total_steps": i})
        tsm_checkpoint.limit_num_subdirs(os.path.abspath(args.checkpoint_dir), 1,
                                         sort_fn=tsm_checkpoint.SORT_BY_LAST_INT, regex=r"^.*\d+steps$",
                                         log=rank == 0)
        del model, opt
        model, opt = build()  # fresh weights, then the checkpoint's
        loaded = tsm_fsdp_checkpoint.load_model_checkpoint(
            model, StateDictType.SHARDED_STATE_DICT, save_dir, model.sharding_strategy,
            (model.process_group, min(get_global_ranks(model.process_group)), metadata[2]),
            optimizer=opt, extra_imports={"total_steps": 0})
        assert loaded[tsm_fsdp_checkpoint.EXPORT_KEY_IDENTITY]["total_steps"] == i
    loss, norm = step(model, opt, tokens)
    losses.append(loss)
    norms.append(norm)

torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-6)
torch.testing.assert_close(norms, ref_norms, rtol=1e-5, atol=1e-6)
assert min(ref_norms) > args.grad_clip, "the test must clip"

# Full checkpoint for export (rank 0 writes), as SMP's scripts save the final model.
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                          FullStateDictConfig(rank0_only=True, offload_to_cpu=device.type == "cuda")):
    final = model.state_dict()
if rank == 0:
    torch.save(final, os.path.join(args.model_dir, "pytorch_model.bin"))
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(final[k], v, rtol=1e-4, atol=1e-5)
with open(os.path.join(args.model_dir, f"result-{rank}.json"), "w") as fh:
    json.dump({"losses": losses, "ref_losses": ref_losses, "norms": norms,
               "kept": sorted(os.listdir(args.checkpoint_dir)) if os.path.isdir(args.checkpoint_dir) else []}, fh)
dist.barrier()
del model, opt
dist.destroy_process_group()
