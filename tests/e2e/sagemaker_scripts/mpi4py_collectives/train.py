"""mpi4py across every host of a SageMaker `mpi` job: Bcast, Allreduce, Gather, and a message large enough to go
through Open MPI's shared memory between the two ranks of one host. Each rank checks what it received and
writes what it saw to the model dir of its own host."""
import argparse
import json
import os
import socket

import numpy as np
from mpi4py import MPI

parser = argparse.ArgumentParser()
parser.add_argument("--large-mib", type=int, default=8)
parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args = parser.parse_args()

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
host = os.environ["SM_CURRENT_HOST"]
hosts = json.loads(os.environ["SM_HOSTS"])
local = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks of this host (shared memory domain)

# Bcast: the root's array reaches everyone.
data = np.arange(16, dtype="i8") if rank == 0 else np.empty(16, dtype="i8")
comm.Bcast(data, root=0)
assert (data == np.arange(16)).all(), data

# Allreduce: the sum of (rank + 1) over the world.
total = np.zeros(4, dtype="f8")
comm.Allreduce(np.full(4, rank + 1.0), total, op=MPI.SUM)
assert (total == size * (size + 1) / 2).all(), total

# Gather: the root learns which host every rank ran on.
seen = comm.gather({"rank": rank, "host": host, "local_rank": local.Get_rank()}, root=0)

# Large message between the two local ranks of each host (shared memory, not TCP), and across hosts.
n = args.large_mib * (1 << 20) // 8
peer = local.Get_rank() ^ 1
if peer < local.Get_size():
    out = np.full(n, float(rank), dtype="f8")
    got = np.empty(n, dtype="f8")
    local.Sendrecv(out, dest=peer, recvbuf=got, source=peer)
    partner_global = local.allgather(rank)[peer]
    assert (got == float(partner_global)).all(), (rank, got[:4])
big = np.full(n, 1.0, dtype="f8")
big_sum = np.empty(n, dtype="f8")
comm.Allreduce(big, big_sum, op=MPI.SUM)
assert (big_sum == float(size)).all()

os.makedirs(args.model_dir, exist_ok=True)
with open(os.path.join(args.model_dir, f"mpi-rank-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "size": size, "host": host, "hosts": hosts, "local_size": local.Get_size(),
               "hostname": socket.gethostname(), "gathered": seen}, f)
print(f"rank {rank}/{size} on {host}: Bcast, Allreduce, Gather and {args.large_mib} MiB messages ok", flush=True)
