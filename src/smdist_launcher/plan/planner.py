"""``build_plan``: the pure function from a resolved job to what runs on each host.

Deterministic and fast (no I/O, shared argv parts computed once, 1,000 hosts × 8 processes in a few ms).
Per strategy, exactly what sagemaker-training-toolkit would run in the container:

==============================  ==================  ==========================================================
strategy                        launcher            hosts
==============================  ==================  ==========================================================
single                          python              every host ``node``: ``python train.py <args>``, 1 process
torch_distributed, smp_v2       torchrun            every host ``node``: ``torchrun --nnodes N ... train.py``
mpi, smp_v1                     mpirun              algo-1 ``mpi_master`` runs mpirun for all ranks, others
smddp, pytorchddp               mpirun              ``mpi_worker`` (argv [], they host the ranks mpirun starts)
parameter_server                parameter_server    every host ``ps`` (parameter server + worker), 1 process
multi_worker_mirrored_strategy  python              every host ``node`` with TF_CONFIG, 1 process
==============================  ==================  ==========================================================

Heterogeneous clusters (several instance groups): the strategy's hosts are those of the distribution's group, whose
first host is the master; every host of the other groups is a ``node`` that runs ``python train.py <args>`` once,
on its own, with no rank (the toolkit's Process runner outside ``distribution_instance_groups``).

SMP parameters travel as the ``mp_parameters`` hyperparameter (as the SDK sends them, so scripts also get
``--mp_parameters k=v,...``); for SMP v2 the host environment also carries them as ``SM_HP_MP_PARAMETERS`` (JSON),
which the smp runtime reads.

Hyperparameters reach the script as the job's SDK has them travel (``job.hyperparameter_encoding``,
plan/hyperparameters.py): SDK v2's toolkit encoding by default; for SDK v3's ModelTrainer, v3's (argv,
hyperparameters.json, and every host's environment carries v3's ``SM_HP_<KEY>`` / ``SM_HPS``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..contract.hyperparameters import HyperparameterEncoding
from ..errors import ErrorItem, ValidationError
from ..jobspec.resolved import ResolvedJob
from .framework_hyperparameters import framework_hyperparameters, tensorflow_model_dir
from .hyperparameters import env_value, file_values, script_args, script_env, script_hyperparameters
from .model import Channel, HostPlan, HostRole, InstanceGroupPlan, Launcher, LaunchPlan, Master
from .mpirun import mpi_argv, smddp_argv
from .network_env import master_env, torchrun_network_env
from .program import is_python_program, program_argv
from .tf_config import mwms_cluster_json, mwms_tf_config, ps_cluster_json, ps_server_tf_config, ps_worker_tf_config
from .topology import group_hosts, host_names, host_ranks
from .torchrun import torchrun_argvs

MP_PARAMETERS = "mp_parameters"
MP_PARAMETERS_ENV = "SM_HP_MP_PARAMETERS"
# The parameter-server process's TF_CONFIG; the runtime starts that process next to the worker.
PS_SERVER_TF_CONFIG_ENV = "SMDIST_PS_TF_CONFIG"
SMP_STRATEGIES = frozenset({"smp_v1", "smp_v2"})
# ResolvedJob fields the plan shows unchanged.
_COPIED_FIELDS = frozenset({
    "job_name", "framework", "strategy", "instance_type", "processes_per_host", "network_interface",
    "entry_point", "source_dir", "max_run", "output_path", "checkpoint_s3_uri", "checkpoint_local_path",
    "hyperparameter_encoding",
})


class _Layout:
    """What every strategy builder needs, computed once per plan."""

    def __init__(self, job: ResolvedJob, script_hps: dict[str, Any]) -> None:
        self.job = job
        self.groups = group_hosts(job.instance_groups)
        self.all_hosts = [h for _, hosts in self.groups for h in hosts] or host_names(job.instance_count)
        ranked = [h for group, hosts in self.groups if group.distribution for h in hosts]
        self.hosts = ranked or self.all_hosts   # the strategy's hosts
        self.master = self.hosts[0]
        self.args = script_args(script_hps, job.hyperparameter_encoding)
        self.base_env = {} if job.framework == "tensorflow" else master_env(self.master, job.master_port)
        # every host's environment; the hyperparameters' variables stay out of base_env, which mpirun passes on by name
        self.env = {**self.base_env, **script_env(script_hps, job.hyperparameter_encoding)}

    def program(self, *, under_mpi: bool = False) -> list[str]:
        return program_argv(self.job.entry_point, self.args, under_mpi=under_mpi)


def _host(
    name: str, role: HostRole, processes: int, ranks: list[int], argv: list[str], env: dict[str, str]
) -> HostPlan:
    # Validation copies argv and env, so hosts may be given the same shared lists and dicts.
    return HostPlan(name=name, role=role, processes=processes, ranks=ranks, argv=argv, env=env)


def _single(lay: _Layout) -> tuple[Launcher, list[HostPlan]]:
    argv = lay.program()
    return "python", [_host(h, "node", 1, [i], argv, lay.env) for i, h in enumerate(lay.hosts)]


def _torchrun(lay: _Layout) -> tuple[Launcher, list[HostPlan]]:
    job = lay.job
    env = {**lay.env, **torchrun_network_env(job)}
    if job.strategy == "smp_v2" and job.mp_parameters and job.hyperparameter_encoding is HyperparameterEncoding.V2:
        env[MP_PARAMETERS_ENV] = env_value(job.mp_parameters)  # v3's is among lay.env's SM_HP_*
    if not is_python_program(job.entry_point):
        raise ValidationError([ErrorItem("entry_point", f"{job.strategy} starts the entry point with torchrun, which "
                                         "runs only python programs (*.py); use a .py entry point or another "
                                         "distribution strategy", job.entry_point)])
    argvs = torchrun_argvs(job, lay.hosts, lay.master, [job.entry_point, *lay.args])
    ppn = job.processes_per_host
    return "torchrun", [_host(h, "node", ppn, host_ranks(i, ppn), argvs[i], env) for i, h in enumerate(lay.hosts)]


def _mpi_pass_env(lay: _Layout) -> list[str]:
    names = [*sorted(lay.job.environment), *lay.base_env, "PYTHONPATH"]
    return list(dict.fromkeys(names))


def _mpirun(lay: _Layout) -> tuple[Launcher, list[HostPlan]]:
    job = lay.job
    program = lay.program(under_mpi=True)
    if job.strategy in ("mpi", "smp_v1"):
        master_argv = mpi_argv(job, lay.hosts, program, _mpi_pass_env(lay))
    else:
        master_argv = smddp_argv(job, lay.hosts, lay.master, program)
    ppn = job.processes_per_host
    plans = [_host(lay.master, "mpi_master", ppn, host_ranks(0, ppn), master_argv, lay.env)]
    plans += [_host(h, "mpi_worker", ppn, host_ranks(i, ppn), [], lay.env)
              for i, h in enumerate(lay.hosts) if i > 0]
    return "mpirun", plans


def _parameter_server(lay: _Layout) -> tuple[Launcher, list[HostPlan]]:
    argv = lay.program()
    if len(lay.hosts) == 1:  # the toolkit starts no parameter server for a single host
        return "parameter_server", [_host(lay.master, "node", 1, [0], argv, lay.env)]
    cluster = ps_cluster_json(lay.hosts)
    plans = [
        _host(h, "ps", 1, [i], argv, {**lay.env, "TF_CONFIG": ps_worker_tf_config(cluster, i),
                                            PS_SERVER_TF_CONFIG_ENV: ps_server_tf_config(cluster, i)})
        for i, h in enumerate(lay.hosts)
    ]
    return "parameter_server", plans


def _multi_worker_mirrored(lay: _Layout) -> tuple[Launcher, list[HostPlan]]:
    argv = lay.program()
    cluster = mwms_cluster_json(lay.hosts)
    return "python", [_host(h, "node", 1, [i], argv, {**lay.env, "TF_CONFIG": mwms_tf_config(cluster, i)})
                      for i, h in enumerate(lay.hosts)]


_BUILDERS: dict[str, Callable[[_Layout], tuple[Launcher, list[HostPlan]]]] = {
    "single": _single,
    "torch_distributed": _torchrun,
    "smp_v2": _torchrun,
    "mpi": _mpirun,
    "smp_v1": _mpirun,
    "smddp": _mpirun,
    "pytorchddp": _mpirun,
    "parameter_server": _parameter_server,
    "multi_worker_mirrored_strategy": _multi_worker_mirrored,
}


def _all_hyperparameters(job: ResolvedJob) -> tuple[dict[str, Any], dict[str, str]]:
    """(hyperparameters the script sees, hyperparameters.json). Refuses to let generated keys overwrite the user's."""
    user = dict(job.hyperparameters)
    generated: dict[str, Any] = {}
    if job.strategy in SMP_STRATEGIES and job.mp_parameters:
        generated[MP_PARAMETERS] = job.mp_parameters
    if job.framework == "tensorflow" and "model_dir" not in user and job.model_dir is not False:
        generated["model_dir"] = job.model_dir or tensorflow_model_dir(job)
    generated.update(framework_hyperparameters(job))
    clashes = sorted(set(user) & set(generated))
    if clashes:
        raise ValidationError([
            ErrorItem(f"hyperparameters.{k}",
                      f"is set by the launcher for this job ({k}={generated[k]!r}); remove it from hyperparameters"
                      + (" and set it under distribution.smdistributed.modelparallel.parameters"
                         if k == MP_PARAMETERS else ""), user[k])
            for k in clashes
        ])
    everything = {**user, **generated}
    script = script_hyperparameters(everything)
    return script, file_values(everything, script, job.hyperparameter_encoding)


def _with_other_groups(lay: _Layout, ranked: list[HostPlan]) -> list[HostPlan]:
    """Every host in name order: the strategy's, then the other groups' hosts running the script alone."""
    by_name = {h.name: h for h in ranked}
    argv = lay.program()
    return [by_name.get(name) or _host(name, "node", 1, [], argv, lay.env) for name in lay.all_hosts]


def _group_plans(lay: _Layout) -> list[InstanceGroupPlan] | None:
    if not lay.groups:
        return None
    return [InstanceGroupPlan(name=g.name, instance_type=g.instance_type, hosts=hosts, distribution=g.distribution)
            for g, hosts in lay.groups]


def build_plan(job: ResolvedJob, channels: dict[str, Channel] | None = None) -> LaunchPlan:
    """The launch plan for ``job``: hosts algo-1..N (master: the first host of the distribution's group), per-host
    role, ranks, argv and environment."""
    script_hps, sagemaker_hps = _all_hyperparameters(job)
    layout = _Layout(job, script_hps)
    launcher, hosts = _BUILDERS[job.strategy](layout)
    hosts = _with_other_groups(layout, hosts)
    return LaunchPlan(
        **job.model_dump(include=set(_COPIED_FIELDS)),
        instance_count=len(hosts),
        launcher=launcher,
        world_size=sum(len(h.ranks) for h in hosts),
        master=Master(host=layout.master, port=job.master_port),
        instance_groups=_group_plans(layout),
        hosts=hosts,
        hyperparameters=script_hps,
        sagemaker_hyperparameters=sagemaker_hps,
        channels=dict(channels or {}),
        environment=dict(job.environment),
    )
