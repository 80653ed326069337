"""One script for both instance groups: SM_CURRENT_INSTANCE_GROUP says which part this host plays."""
import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args, _ = parser.parse_known_args()
group = os.environ["SM_CURRENT_INSTANCE_GROUP"]
if group in json.loads(os.environ["SM_DISTRIBUTION_INSTANCE_GROUPS"]):
    import torch.distributed as dist

    dist.init_process_group()  # torchrun's rendezvous on the group's first host
    print(f"[{group}] rank {dist.get_rank()}/{dist.get_world_size()}: training {args.epochs} epochs")
    dist.destroy_process_group()
else:
    # not part of the world: e.g. preprocess or serve data for the training group
    hosts = json.loads(os.environ["SM_INSTANCE_GROUPS_DICT"])
    print(f"[{group}] {os.environ['SM_CURRENT_HOST']}: preparing data for {sorted(hosts)}")
