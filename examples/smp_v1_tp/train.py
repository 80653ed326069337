"""Minimal SMP v1 script: smp.init() reads mp_parameters (tensor parallel degree 4 here) and reports the layout."""
import smdistributed.modelparallel.torch as smp

smp.init()
print(f"rank {smp.rank()}/{smp.size()}: tp_rank {smp.tp_rank()}, dp_rank {smp.dp_rank()}")
