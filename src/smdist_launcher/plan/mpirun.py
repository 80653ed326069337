"""The mpirun command line the toolkit's master host runs (``mpi.MasterRunner`` and
``smdataparallel.SMDataParallelRunner``).

Left out on purpose: the toolkit's ``-x LD_PRELOAD=<gethostname .so>`` hack (a real host has its own name; a
simulated one gets it from a UTS namespace: container/host_isolation.py)
and ``smddpmprun`` (not shipped). Environment reaches ranks by name (``-x NAME``), never ``-x NAME=value`` for user
values, so secrets stay out of argv; fixed toolkit settings keep their ``-x NAME=value`` form.
SM_* variables reach remote ranks through the host environment (the runtime hands each host's environment to the
processes mpirun starts there, like the toolkit's /etc/environment), so they are not listed.
"""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import NoReturn

from ..errors import ErrorItem, ValidationError
from ..jobspec.resolved import ResolvedJob

SMDDP_SERVER_PORT = 7592
SMDDPRUN = "smddprun"

CUSTOM_OPTIONS_KEY = {
    "mpi": "distribution.mpi.custom_mpi_options",
    "smp_v1": "distribution.mpi.custom_mpi_options",
    "smddp": "distribution.smdistributed.dataparallel.custom_mpi_options",
    "pytorchddp": "distribution.pytorchddp.custom_mpi_options",
}

# Open MPI settings both runners share.
_COMMON_MCA = (
    "-mca", "pml", "ob1",
    "-mca", "btl", "^openib",
    "-mca", "orte_abort_on_non_zero_status", "1",
    "-mca", "btl_vader_single_copy_mechanism", "none",
)


@dataclass(frozen=True)
class CustomMpiOptions:
    nccl_debug: str
    extra: list[str]


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit the process
        raise ValueError(message)


def parse_custom_mpi_options(options: str, key_path: str) -> CustomMpiOptions:
    """Like the toolkit: ``argparse.parse_known_args`` knows only ``--NCCL_DEBUG`` (default INFO); every other token is
    appended to mpirun verbatim. Tokens are split with shlex so quoted values stay whole."""
    parser = _RaisingParser(add_help=False)
    parser.add_argument("--NCCL_DEBUG", default="INFO", type=str)
    try:
        known, extra = parser.parse_known_args(shlex.split(options))
    except ValueError as exc:
        message = (f"cannot parse mpirun options ({exc}); write them as you would on a command line, "
                   'e.g. "-x FOO=1 --NCCL_DEBUG WARN"')
        raise ValidationError([ErrorItem(key_path, message, options)]) from None
    return CustomMpiOptions(nccl_debug=known.NCCL_DEBUG, extra=extra)


def _network_mca(iface: str) -> list[str]:
    return ["-mca", "btl_tcp_if_include", iface, "-mca", "oob_tcp_if_include", iface,
            "-mca", "plm_rsh_no_tree_spawn", "1"]


def _pass_by_name(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        out += ["-x", name]
    return out


def _torch_major(framework_version: str | None) -> int:
    """Unknown versions (image_uri jobs) count as current torch (≥ 2)."""
    head = (framework_version or "2").split(".")[0]
    return int(head) if head.isdigit() else 2


def mpi_argv(job: ResolvedJob, hosts: list[str], program: list[str], pass_env: list[str]) -> list[str]:
    """Toolkit §2.2 (``mpi`` and SMP v1). ``pass_env``: variable names handed to every rank with ``-x NAME``."""
    ppn = job.processes_per_host
    iface = job.network_interface
    opts = parse_custom_mpi_options(job.custom_mpi_options, CUSTOM_OPTIONS_KEY[job.strategy])
    host_list = ",".join(hosts) if ppn == 1 else ",".join(f"{h}:{ppn}" for h in hosts)
    argv = [
        "mpirun", "--host", host_list, "-np", str(ppn * len(hosts)),
        "--allow-run-as-root", "--display-map", "--tag-output",
        *_network_mca(iface),
        "-bind-to", "none", "-map-by", "slot",
        *_COMMON_MCA,
        "-x", "NCCL_MIN_NRINGS=4", "-x", f"NCCL_SOCKET_IFNAME={iface}", "-x", f"NCCL_DEBUG={opts.nccl_debug}",
        "-x", "LD_LIBRARY_PATH", "-x", "PATH",
        *opts.extra,
    ]
    if job.instance.efa:
        argv += ["-x", "FI_PROVIDER=efa", "-x", "NCCL_PROTO=simple"]
    if job.instance.efa_rdma:
        argv += ["-x", "FI_EFA_USE_DEVICE_RDMA=1"]
    argv += _pass_by_name(pass_env)
    if job.strategy == "smp_v1":
        argv += ["-x", "NCCL_PROTO=simple"]
        if _torch_major(job.framework_version) >= 2:
            argv += ["-x", "NCCL_ALGO=ring"]
    return argv + program


def smddp_argv(job: ResolvedJob, hosts: list[str], master: str, program: list[str]) -> list[str]:
    """Toolkit §2.3 (``smddp`` and ``pytorchddp``): mpirun + ``smddprun`` in front of the ranks."""
    ppn = job.processes_per_host
    iface = job.network_interface
    opts = parse_custom_mpi_options(job.custom_mpi_options, CUSTOM_OPTIONS_KEY[job.strategy])
    multi_node = len(hosts) > 1
    host_list = ",".join(f"{h}:{ppn}" for h in hosts) if multi_node else hosts[0]
    argv = [
        "mpirun", "--host", host_list, "-np", str(ppn * len(hosts)),
        "--allow-run-as-root", "--tag-output", "--oversubscribe",
        *_network_mca(iface),
        *_COMMON_MCA,
        "-mca", "plm_rsh_num_concurrent", str(len(hosts)),
        "-x", f"NCCL_SOCKET_IFNAME={iface}", "-x", f"NCCL_DEBUG={opts.nccl_debug}",
        "-x", "LD_LIBRARY_PATH", "-x", "PATH",
        "-x", "SMDATAPARALLEL_USE_HOMOGENEOUS=1" if multi_node else "SMDATAPARALLEL_USE_SINGLENODE=1",
        # the toolkit always asks libfabric for EFA; local mode has none (and names no provider, as torchrun's hosts)
        *(() if job.instance.local else ("-x", "FI_PROVIDER=efa")), "-x", "RDMAV_FORK_SAFE=1",
        *opts.extra,
    ]
    if job.instance.efa:
        argv += ["-x", "NCCL_PROTO=simple"]
    if job.instance.efa_rdma:
        argv += ["-x", "FI_EFA_USE_DEVICE_RDMA=1"]
    if multi_node:
        argv += [
            "-x", f"SMDATAPARALLEL_SERVER_ADDR={master}",
            "-x", f"SMDATAPARALLEL_SERVER_PORT={SMDDP_SERVER_PORT}",
            "-x", f"SAGEMAKER_INSTANCE_TYPE={job.instance_type}",
        ]
    return [*argv, SMDDPRUN, *program]
