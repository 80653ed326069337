"""Which launcher a distribution means, and how many processes each host runs.

Precedence (first match wins; every other enabled block must agree with it or is an error, never silently dropped):
  1. smdistributed.modelparallel  + torch_distributed → smp_v2 (torchrun)   | + mpi → smp_v1 (mpirun)
  2. smdistributed.dataparallel                       → smddp (mpirun + smddprun)
  3. pytorchddp                                       → pytorchddp (mpirun + smddprun)
  4. torch_distributed                                → torch_distributed (torchrun)
  5. mpi                                              → mpi (mpirun)
  6. parameter_server                                 → parameter_server
  7. multi_worker_mirrored_strategy                   → multi_worker_mirrored_strategy
  8. nothing enabled                                  → single (python <entry> on each host)
`mpi.processes_per_host` without `mpi.enabled` is allowed next to any multi-process launcher: the container reads it
for every runner (sagemaker_mpi_num_of_processes_per_host), so it is the one knob for processes per host.
Processes per host otherwise: the instance's GPUs, else its Neuron cores, else 1 (local_gpu: 1; GPUs are found at run
time).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..errors import ErrorItem
from .distribution import Distribution
from .error_items import item
from .resolved import InstanceInfo, Strategy
from .smp_parameters import V1_KEYS, V2_KEYS

MULTI_PROCESS: frozenset[str] = frozenset({"torch_distributed", "pytorchddp", "smddp", "smp_v1", "smp_v2", "mpi"})
MPI_LAUNCHED: frozenset[str] = frozenset({"pytorchddp", "smddp", "smp_v1", "mpi"})
# torchrun starts Python programs only (the toolkit raises "Unsupported entry point type" for anything else); mpirun
# also runs a shell script or any other executable (plan/program.py).
TORCHRUN_LAUNCHED: frozenset[str] = MULTI_PROCESS - MPI_LAUNCHED

_TOGGLES = ("pytorchddp", "torch_distributed", "parameter_server", "multi_worker_mirrored_strategy", "pytorchxla")
D = "distribution"
# after SMP (which needs the torchrun/mpirun flag to pick v1 or v2): first enabled flag wins, see the module docstring
_PRECEDENCE: tuple[tuple[str, Strategy], ...] = (
    ("dp", "smddp"), ("pddp", "pytorchddp"), ("td", "torch_distributed"), ("mpi", "mpi"), ("ps", "parameter_server"),
    ("mwms", "multi_worker_mirrored_strategy"),
)


@dataclass
class Launch:
    strategy: Strategy | None              # None when no launcher can be chosen (see errors)
    processes_per_host: int = 1
    custom_mpi_options: str = ""
    errors: list[ErrorItem] = field(default_factory=list)


def _enabled_missing(dist: Distribution) -> list[ErrorItem]:
    out = []
    for key in _TOGGLES:
        block = getattr(dist, key)
        if block is not None and block.enabled is None:
            out.append(item(f"{D}.{key}.enabled", f"is missing; set enabled: true to use {key}, or remove the block "
                                                  "(SageMaker would silently ignore it)"))
    sm = dist.smdistributed
    if sm is not None:
        if sm.dataparallel is None and sm.modelparallel is None:
            out.append(item(f"{D}.smdistributed", "choose a strategy: add dataparallel: {enabled: true} or "
                                                  "modelparallel: {enabled: true, parameters: {...}}", {}))
        for name in ("dataparallel", "modelparallel"):
            block = getattr(sm, name)
            if block is not None and block.enabled is None:
                out.append(item(f"{D}.smdistributed.{name}.enabled", f"is missing; set enabled: true to use "
                                                                      f"smdistributed.{name}, or remove the block"))
    return out


def _smp_version(dist: Distribution, td: bool, mpi_on: bool) -> tuple[Strategy | None, list[ErrorItem]]:
    given = dist.smp_parameters.given()
    v1, v2 = sorted(given & V1_KEYS), sorted(given & V2_KEYS)
    params_path = f"{D}.smdistributed.modelparallel.parameters"
    if td and mpi_on:
        return None, [item(f"{D}.mpi.enabled",
                           "SMP cannot be launched by both torchrun and mpirun: keep torch_distributed "
                           "for SMP v2 or mpi for SMP v1", True)]
    if not td and not mpi_on:
        if v2 and not v1:
            msg = f"SMP v2 parameters ({', '.join(v2)}) need torch_distributed: {{enabled: true}} next to smdistributed"
            return None, [item(f"{D}.torch_distributed", msg)]
        if v1 and not v2:
            msg = (f"SMP v1 parameters ({', '.join(v1)}) need mpi: {{enabled: true, processes_per_host: N}} "
                   "next to smdistributed")
            return None, [item(f"{D}.mpi", msg)]
        return None, [item(f"{D}.smdistributed.modelparallel", "needs a launcher: add mpi: {enabled: true} (SMP v1) or "
                                                                "torch_distributed: {enabled: true} (SMP v2)")]
    strategy: Strategy = "smp_v2" if td else "smp_v1"
    wrong, version, launcher, other = ((v1, "v1", "torch_distributed (SMP v2)", "mpi") if td
                                       else (v2, "v2", "mpi (SMP v1)", "torch_distributed"))
    errors = [
        item(f"{params_path}.{key}",
             f"is an SMP {version} parameter, which {launcher} does not use; remove it, or launch "
             f"with {other} for SMP {version}", getattr(dist.smp_parameters, key))
        for key in wrong
    ]
    return strategy, errors


def _conflicts(dist: Distribution, strategy: Strategy | None, flags: dict[str, bool]) -> list[ErrorItem]:
    out: list[ErrorItem] = []
    td, mpi_on, pddp, ps, mwms = (flags[k] for k in ("td", "mpi", "pddp", "ps", "mwms"))
    sm_on = flags["dp"] or flags["mp"]
    if flags["dp"] and flags["mp"]:
        out.append(item(f"{D}.smdistributed",
                        "cannot use more than one smdistributed strategy; choose dataparallel or modelparallel"))
    if pddp and sm_on:
        out.append(item(f"{D}.pytorchddp", "cannot be combined with smdistributed (SageMaker turns pytorchddp into "
                                           "smdistributed.dataparallel); keep one", True))
    if strategy == "smddp":
        if td:
            out.append(item(f"{D}.torch_distributed",
                            "smdistributed.dataparallel launches with mpirun, torch_distributed with "
                            "torchrun; keep one (to use the smddp backend under torchrun, enable only "
                            "torch_distributed and call init_process_group(backend='smddp'))", True))
        if mpi_on:
            out.append(item(f"{D}.mpi.enabled",
                            "smdistributed.dataparallel starts its own mpirun; with mpi.enabled the "
                            "container would run plain MPI instead. Remove it (MPI flags go in "
                            "smdistributed.dataparallel.custom_mpi_options)", True))
    if strategy == "pytorchddp":
        if td:
            out.append(item(f"{D}.torch_distributed",
                            "pytorchddp (mpirun) and torch_distributed (torchrun) are two launchers; "
                            "keep one", True))
        if mpi_on:
            out.append(item(f"{D}.mpi.enabled", "pytorchddp starts its own mpirun; remove mpi.enabled (MPI flags go in "
                                                "pytorchddp.custom_mpi_options)", True))
    if strategy == "torch_distributed" and mpi_on:
        out.append(item(f"{D}.mpi.enabled", "torch_distributed (torchrun) and mpi (mpirun) are two launchers; keep one "
                                            "(mpi.processes_per_host without enabled sets the processes per host)",
                        True))
    if ps and (mpi_on or td or pddp or sm_on):
        out.append(item(f"{D}.parameter_server",
                        "cannot be combined with MPI, torchrun or smdistributed launchers; keep one", True))
    if mwms and (sm_on or ps or mpi_on or td or pddp):
        out.append(item(f"{D}.multi_worker_mirrored_strategy",
                        "cannot be combined with smdistributed, parameter_server, mpi or "
                        "torch_distributed; keep one", True))
    if flags["xla"]:
        out.append(item(f"{D}.pytorchxla.enabled",
                        "PyTorch/XLA needs SageMaker Training Compiler, which smdist-launcher does "
                        "not support; use torch_distributed", True))
    return out


def _mpi_options(dist: Distribution, strategy: Strategy | None) -> tuple[str, list[ErrorItem]]:
    out: list[ErrorItem] = []
    sources = {
        f"{D}.mpi.custom_mpi_options": dist.mpi.custom_mpi_options if dist.mpi else None,
        f"{D}.smdistributed.dataparallel.custom_mpi_options":
            dist.smdistributed.dataparallel.custom_mpi_options
            if dist.smdistributed and dist.smdistributed.dataparallel else None,
        f"{D}.pytorchddp.custom_mpi_options": dist.pytorchddp.custom_mpi_options if dist.pytorchddp else None,
    }
    used_by = {"mpi": f"{D}.mpi.custom_mpi_options", "smp_v1": f"{D}.mpi.custom_mpi_options",
               "smddp": f"{D}.smdistributed.dataparallel.custom_mpi_options",
               "pytorchddp": f"{D}.pytorchddp.custom_mpi_options"}
    chosen = ""
    for path, text in sources.items():
        if text is None:
            continue
        try:
            shlex.split(text)
        except ValueError as exc:
            out.append(item(path, f"cannot be split into arguments ({exc}); balance the quotes", text))
            continue
        if strategy is None:
            continue
        if used_by.get(strategy) == path:
            chosen = text
        elif strategy in used_by:
            out.append(item(path, f"is not used by {strategy}; put MPI options in {used_by[strategy]}", text))
        else:
            out.append(item(path, f"is only used when mpirun launches the job; {strategy} does not use MPI", text))
    return chosen, out


def default_processes_per_host(instance: InstanceInfo | None) -> int:
    if instance is None:
        return 1
    if instance.gpus > 0:
        return instance.gpus
    if instance.neuron_cores > 0:
        return instance.neuron_cores
    return 1


def decide(dist: Distribution | None, instance: InstanceInfo | None) -> Launch:
    """The launcher, processes per host and MPI options of `dist`, with every contradiction as an ErrorItem."""
    dist = dist or Distribution()
    errors = _enabled_missing(dist)
    flags = {
        "td": dist.on("torch_distributed"), "mpi": dist.on("mpi"), "pddp": dist.on("pytorchddp"),
        "ps": dist.on("parameter_server"), "mwms": dist.on("multi_worker_mirrored_strategy"),
        "xla": dist.on("pytorchxla"),
        "dp": dist.dataparallel_on, "mp": dist.modelparallel_on,
    }
    strategy: Strategy | None = "single"
    if flags["mp"]:
        strategy, smp_errors = _smp_version(dist, flags["td"], flags["mpi"])
        errors += smp_errors
    else:
        strategy = next((name for flag, name in _PRECEDENCE if flags[flag]), "single")
    errors += _conflicts(dist, strategy, flags)
    options, option_errors = _mpi_options(dist, strategy)
    errors += option_errors

    pph = default_processes_per_host(instance)
    mpi = dist.mpi
    if mpi is not None and mpi.enabled is None and strategy is not None and strategy not in MULTI_PROCESS:
        errors.append(item(f"{D}.mpi.enabled",
                           "is missing; set enabled: true to launch with mpirun, or remove the block"))
    elif mpi is not None and mpi.processes_per_host is not None and strategy is not None:
        if strategy in MULTI_PROCESS:
            pph = mpi.processes_per_host
        else:
            errors.append(item(f"{D}.mpi.processes_per_host",
                               f"{strategy} runs one process per host; processes_per_host "
                               "needs a multi-process launcher (torch_distributed, mpi, "
                               "pytorchddp or smdistributed)", mpi.processes_per_host))
    if strategy is not None and strategy not in MULTI_PROCESS:
        pph = 1
    return Launch(strategy=strategy, processes_per_host=pph, custom_mpi_options=options, errors=errors)
