"""The torchrun command line every host runs (toolkit ``torch_distributed.TorchDistributedRunner``).

Static rendezvous, no restarts: the toolkit passes no ``--rdzv_*``/``--max_restarts`` flags, and the master flags
only when there is more than one node (a single node uses torchrun's defaults).
"""
from __future__ import annotations

from ..jobspec.resolved import ResolvedJob

NEURON_COMPILE_FLAG = "RUN_NEURON_PARALLEL_COMPILE"


def torchrun_argvs(job: ResolvedJob, hosts: list[str], master: str, program: list[str]) -> list[list[str]]:
    """One argv per host; only ``--node_rank`` differs. ``program``: entry point and script arguments."""
    nnodes = len(hosts)
    head = ["neuron_parallel_compile"] if job.environment.get(NEURON_COMPILE_FLAG) == "1" else []
    head += ["torchrun", "--nnodes", str(nnodes), "--nproc_per_node", str(job.processes_per_host)]
    if nnodes == 1:
        return [head + program]
    head += ["--master_addr", master, "--master_port", str(job.master_port), "--node_rank"]
    return [[*head, str(i), *program] for i in range(nnodes)]
