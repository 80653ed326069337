"""SMP v2 tensor parallelism the way SMP v2's example scripts get it: tsm.init -> tsm.transform(model) (TP from
tensor_parallel_degree) -> FSDP(FULL_SHARD, transformer_auto_wrap_policy over SMP's TransformerLayer) with no
process group given (SMP supplies the data-parallel mesh) -> SMP's clip_grad_norm_ -> sharded checkpoint (saved, then
resumed into a fresh model) and full checkpoint through torch.sagemaker.distributed.fsdp.checkpoint. Losses, gradient
norms and final weights must equal a one-process reference trained on the whole batch."""
import argparse
import copy
import functools
import json
import os
import shutil

import torch
import torch.distributed as dist
import torch.sagemaker as tsm
from model import CausalLM
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, StateDictType
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.sagemaker import transform
from torch.sagemaker.distributed.fsdp import checkpoint as tsm_fsdp_checkpoint
from torch.sagemaker.grad_norm import clip_grad_norm_
from torch.sagemaker.tensor_parallel.transformer import TransformerLayer

parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=3)
parser.add_argument("--global_batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=12)
parser.add_argument("--lr", type=float, default=0.3)
parser.add_argument("--grad_clip", type=float, default=0.5)
# Sharded checkpoints need a file system all hosts share (FSx on SageMaker); job.yaml points this at one.
parser.add_argument("--checkpoint_dir", default="/fsx/checkpoints")
parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args, _ = parser.parse_known_args()  # SageMaker also passes --mp_parameters
torch.set_num_threads(1)

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
job_name = json.loads(os.environ.get("SM_TRAINING_ENV", "{}")).get("job_name", "local")
args.checkpoint_dir = os.path.join(args.checkpoint_dir, job_name)
tsm.init()
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
tp = tsm.state.tensor_parallel_degree
assert tp == 2 and tsm.state.tp_size == 2

torch.manual_seed(1234)
model = CausalLM(layers=2)
ref = copy.deepcopy(model)
model = transform(model)
assert all(isinstance(layer, TransformerLayer) for layer in model.layers)
model = FSDP(model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                       transformer_layer_cls={TransformerLayer}),
             sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=device, use_orig_params=True)
assert dist.get_world_size(model.process_group) == world // tp, "FSDP shards over the data-parallel ranks only"

# As SMP's scripts compute it: data-parallel rank and size from the global rank and the TP degree.
dp_rank, dp_size = rank // tp, world // tp
assert (dp_rank, dp_size) == (tsm.state.dp_rank, tsm.state.dp_size)
g = torch.Generator().manual_seed(7)
data = [torch.randint(0, 64, (args.global_batch, args.seq), generator=g) for _ in range(args.max_steps)]

opt = torch.optim.SGD(model.parameters(), lr=args.lr)
ref_opt = torch.optim.SGD(ref.parameters(), lr=args.lr)
losses, norms, ref_losses, ref_norms = [], [], [], []
per = args.global_batch // dp_size
for tokens in data:
    mine = tokens[dp_rank * per:(dp_rank + 1) * per].to(device)
    loss = model(input_ids=mine, labels=mine)["loss"]
    loss.backward()
    norms.append(float(clip_grad_norm_(model, args.grad_clip)))
    opt.step()
    opt.zero_grad(set_to_none=True)
    avg = loss.detach().clone()
    dist.all_reduce(avg)
    losses.append(avg.item() / world)  # every TP rank of a data-parallel group holds the same loss

    ref_loss = ref(input_ids=tokens, labels=tokens)["loss"]
    ref_loss.backward()
    ref_norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), args.grad_clip)))
    ref_opt.step()
    ref_opt.zero_grad()
    ref_losses.append(ref_loss.item())

    if len(losses) == args.max_steps - 1:  # sharded checkpoint, then resume from it into a fresh copy
        tsm_fsdp_checkpoint.save_model_checkpoint(model, StateDictType.SHARDED_STATE_DICT, args.checkpoint_dir,
                                                  log=rank == 0, optimizer=opt,
                                                  extra_exports={"total_steps": len(losses)})
        fresh = FSDP(transform(CausalLM(layers=2)),
                     auto_wrap_policy=functools.partial(transformer_auto_wrap_policy,
                                                        transformer_layer_cls={TransformerLayer}),
                     sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=device, use_orig_params=True)
        fresh_opt = torch.optim.SGD(fresh.parameters(), lr=args.lr)
        loaded = tsm_fsdp_checkpoint.load_model_checkpoint(fresh, StateDictType.SHARDED_STATE_DICT,
                                                           args.checkpoint_dir, optimizer=fresh_opt,
                                                           extra_imports={"total_steps": 0})
        assert loaded[tsm_fsdp_checkpoint.EXPORT_KEY_IDENTITY]["total_steps"] == len(losses)
        del model, opt
        model, opt = fresh, fresh_opt

torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-6)
torch.testing.assert_close(norms, ref_norms, rtol=1e-5, atol=1e-6)
assert min(ref_norms) > args.grad_clip, "the test must clip"

tsm_fsdp_checkpoint.save_model_checkpoint(model, StateDictType.FULL_STATE_DICT, args.model_dir,
                                          log=rank == 0)
if rank == 0:
    saved = torch.load(os.path.join(args.model_dir, tsm_fsdp_checkpoint.FULL_CHECKPOINT_FILE), weights_only=False)
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(saved[tsm_fsdp_checkpoint.EXPORT_KEY_MODEL][k], v, rtol=1e-4, atol=1e-5)
with open(os.path.join(args.model_dir, f"result-{rank}.json"), "w") as fh:
    json.dump({"losses": losses, "ref_losses": ref_losses, "norms": norms, "tp_rank": tsm.state.tp_rank}, fh)
dist.barrier()
if rank == 0:
    shutil.rmtree(args.checkpoint_dir, ignore_errors=True)
del model, opt
dist.destroy_process_group()
