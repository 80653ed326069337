"""``smdist run job.yaml [--instance-count N] [--processes-per-host P] [--input NAME=URI] ...``.

Loads the job file into its estimator (the same path as ``PyTorch(...).fit()``), applies the
overrides, and runs it with the local backend. Exit codes: 0 completed, 1 the job failed or hit
max_run, 2 invalid input, 130 stopped by Ctrl-C."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..backends.states import JobState
from ..errors import JobFailedError, ValidationError
from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK, report_invalid
from .kubernetes_flags import add_kubernetes_flags, kubernetes_flags, refuse_kubernetes_flags

EXIT_FAILED = 1
EXIT_STOPPED = 130


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run", help="run a job file on this machine (local mode, simulated hosts)",
                              description="Run the job's launch plan on this machine: one sandboxed host per instance.")
    p.add_argument("job_file", help="YAML job file (estimator arguments + framework)")
    p.add_argument("--instance-count", type=int, metavar="N", help="override instance_count")
    p.add_argument("--processes-per-host", type=int, metavar="P",
                   help="override the processes per host (distribution.mpi.processes_per_host)")
    p.add_argument("--instance-type", metavar="TYPE", choices=("local", "local_cpu", "local_gpu"),
                   help="override instance_type (local mode types only)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=URI",
                   help="set channel NAME to URI (file://, s3:// or a path); repeatable")
    p.add_argument("--hyperparameter", "-H", action="append", default=[], metavar="KEY=VALUE",
                   help="set a hyperparameter (the value is kept as a string); repeatable")
    p.add_argument("--max-run", type=int, metavar="SECONDS", help="override max_run")
    p.add_argument("--job-name", help="job name (default: <base_job_name>-<timestamp>)")
    p.add_argument("--jobs-dir",
                   help="where job folders go (default: $SMDIST_JOBS_DIR, else the nearest .smdist/jobs here or above, "
                        "else ./.smdist/jobs)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not stream the hosts' output (it is still saved)")
    from ..backends.registry import BACKENDS, DEFAULT  # stdlib only: the backends themselves load when chosen

    p.add_argument("--backend", choices=list(BACKENDS), default=DEFAULT,
                   help="how the simulated hosts run: " + "; ".join(f"{k}: {v[1]}" for k, v in BACKENDS.items()))
    p.add_argument("--inject", action="append", default=[], metavar="FAULT@SECONDS",
                   help="rehearse a failure, SECONDS after the first rank started (repeatable): kill-host:algo-N, "
                        "kill-rank:R, hang-rank:R or preempt; with max_retry_attempts the job is restarted from its "
                        "checkpoints (process, netns, docker)")
    slurm = p.add_argument_group("with --backend slurm")
    slurm.add_argument("--partition", help="sbatch --partition")
    slurm.add_argument("--account", help="sbatch --account")
    slurm.add_argument("--qos", help="sbatch --qos")
    slurm.add_argument("--time", help="sbatch --time, e.g. 2:00:00 (default: the job's max_run)")
    slurm.add_argument("--gpus-per-node", type=int, metavar="G",
                       help="GPUs per node (default: the instance type's); also for --backend kubernetes")
    slurm.add_argument("--no-wait", action="store_true",
                       help="submit and return; then smdist status|logs --follow|stop NAME (also kubernetes)")
    add_kubernetes_flags(p)
    return p


SLURM_FLAGS = ("partition", "account", "qos", "time", "gpus_per_node")


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The chosen backend's options (its Options model's fields) from the flags: the Slurm flags go to slurm, the
    kubernetes flags to kubernetes."""
    chosen = {k: getattr(args, k, None) for k in SLURM_FLAGS if getattr(args, k, None) is not None}
    if getattr(args, "backend", None) == "kubernetes":   # --gpus-per-node is an option of both
        slurm_only = sorted(set(chosen) - {"gpus_per_node"})
        if slurm_only:
            raise ValueError(", ".join("--" + k.replace("_", "-") for k in slurm_only) + ": only used with "
                             "--backend slurm")
        options = {**chosen, **kubernetes_flags(args)}
        # --inject is not a kubernetes option: the options model refuses it by name
        return {**options, "inject": list(args.inject)} if getattr(args, "inject", None) else options
    refuse_kubernetes_flags(args)
    if getattr(args, "backend", None) == "slurm":
        return {**chosen, "inject": list(args.inject)} if getattr(args, "inject", None) else chosen
    if chosen or getattr(args, "no_wait", False):
        flags = ", ".join("--" + k.replace("_", "-") for k in chosen) or "--no-wait"
        raise ValueError(f"{flags}: only used with --backend slurm")
    return {"inject": list(args.inject)} if getattr(args, "inject", None) else {}


def _pairs(values: list[str], flag: str) -> dict[str, str] | ValidationError:
    from ..errors import ErrorItem

    out, bad = {}, []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            bad.append(ErrorItem(flag, f"expected NAME=VALUE, got {value!r}", value))
        else:
            out[key] = rest
    return ValidationError(bad) if bad else out


def overrides_from(args: argparse.Namespace) -> dict[str, Any] | ValidationError:
    """The job-file overrides the flags ask for (merged over the file before validation)."""
    overrides: dict[str, Any] = {}
    if args.instance_count is not None:
        overrides["instance_count"] = args.instance_count
    if args.instance_type is not None:
        overrides["instance_type"] = args.instance_type
    if args.processes_per_host is not None:
        overrides["distribution"] = {"mpi": {"processes_per_host": args.processes_per_host}}
    if args.max_run is not None:
        overrides["max_run"] = args.max_run
    hyperparameters = _pairs(args.hyperparameter, "--hyperparameter")
    if isinstance(hyperparameters, ValidationError):
        return hyperparameters
    if hyperparameters:
        overrides["hyperparameters"] = hyperparameters
    inputs = _pairs(args.input, "--input")
    if isinstance(inputs, ValidationError):
        return inputs
    if inputs:
        from ..jobspec.inputs import local_path

        # typed on the command line, so relative to the current folder (the file's own inputs: to the file's folder)
        overrides["inputs"] = {k: v if "://" in v and not v.lower().startswith("file://") else "file://" + local_path(v)
                               for k, v in inputs.items()}
    return overrides


def run(args: argparse.Namespace) -> int:
    from ..backends import registry
    from ..estimators import estimator_from_job_file
    from ..estimators.job_names import name_from_base

    overrides = overrides_from(args)
    if isinstance(overrides, ValidationError):
        return report_invalid(args.job_file, overrides)
    try:
        estimator = estimator_from_job_file(args.job_file, overrides=overrides)
        job_file = estimator.job_file
        base = (job_file.job_name if job_file is not None and job_file.job_name else None) or estimator.base_job_name
        plan = estimator.plan(job_name=args.job_name or name_from_base(base))
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    except OSError as exc:
        problem(f"{args.job_file}: {exc}")
        return EXIT_INVALID
    name = getattr(args, "backend", None)
    try:
        backend = registry.for_job(name, plan.instance_types)
    except ValueError as exc:
        if name not in (None, "process", "netns", "docker"):
            problem(f"{args.job_file}: {exc}")
        else:
            problem(f"{args.job_file}: instance_type: smdist run runs local mode only; {plan.instance_type!r} needs "
                    "Amazon SageMaker (smdist submit) or --backend slurm. Try --instance-type local")
        return EXIT_INVALID
    try:
        dry = backend.dryrun(estimator.submission(plan), backend_options(args))
        job = backend.submit(dry, logs=not args.quiet, jobs_root=args.jobs_dir,
                             wait=not getattr(args, "no_wait", False))
    except JobFailedError as exc:
        problem(str(exc))
        return EXIT_STOPPED if exc.status == JobState.STOPPED else EXIT_FAILED
    except ValidationError as exc:  # backend options (e.g. --time) are checked before anything is submitted
        return report_invalid(args.job_file, exc)
    except (FileExistsError, ValueError) as exc:
        problem(f"{args.job_file}: {exc}")
        return EXIT_INVALID
    except RuntimeError as exc:  # the scheduler refused or is missing (backends.slurm.scheduler.SlurmError)
        problem(f"{args.job_file}: {exc}")
        return EXIT_FAILED
    if getattr(args, "no_wait", False):
        sys.stdout.write(f"{job.job_name} submitted; follow it with: smdist logs {job.job_name} --follow\n")
        return EXIT_OK
    if args.quiet:
        sys.stdout.write(f"{job.job_name} Completed {job.model_data or ''}\n")
    return EXIT_OK
