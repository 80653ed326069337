"""Minimal SMP v1 script with pipeline parallelism: reports the tensor/pipeline/data-parallel position of each rank."""
import smdistributed.modelparallel.torch as smp

smp.init()
print(f"rank {smp.rank()}: tp_rank {smp.tp_rank()} pp_rank {smp.pp_rank()} dp_rank {smp.dp_rank()} microbatches {smp.num_microbatches()}")
