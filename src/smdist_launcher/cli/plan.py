"""``smdist plan job.yaml [--format yaml|json] [--host algo-2] [--check FILE | --write FILE] [--dryrun --backend B]``.

Prints the launch plan (secrets redacted). ``--check`` compares with a pinned plan file: exit 1 and a unified diff
when it changed; ``--write`` (re)writes the pinned file. The pinned file's format follows its extension.
``--dryrun --backend B`` prints (or pins) what backend B would start or send instead: for sagemaker the
CreateTrainingJob request (secrets redacted, no AWS call: ``<account>`` and, without ``--region`` or a region in the
job file, ``<region>`` are placeholders), for slurm the sbatch script, for process/netns/docker each host's command.
``--request`` and ``--slurm`` are the older spellings of ``--dryrun --backend sagemaker|slurm``; ``--wire v3`` shows
the request in SageMaker SDK v3's shape (backends/sagemaker/request_v3.py).

``smdist plan request.json``: a CreateTrainingJob request (JSON, e.g. what SDK v3 sent) instead of a job file shows
the plan `smdist serve` would run for it: a container-command plan for requests with ContainerEntrypoint (every host
runs the command), else the estimator's plan.
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError
from .console import show
from .job_loading import EXIT_DIFFERS, EXIT_OK, LoadedJob, load_or_report, report_invalid
from .kubernetes_flags import FLAVOURS

if TYPE_CHECKING:  # pragma: no cover
    from ..plan.model import LaunchPlan


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help="print the launch plan of a job file, or check/update a pinned plan",
                              description="Print what would run on each host. Nothing is uploaded or started.")
    p.add_argument("job_file", help="YAML job file (estimator arguments + framework), or a CreateTrainingJob request "
                                    "(.json) to see what smdist serve would run for it")
    p.add_argument("--format", choices=("yaml", "json"),
                   help="output format (default: yaml; for --check/--write: the file's extension)")
    p.add_argument("--host", metavar="NAME", help="show only this host's part (e.g. algo-2)")
    pin = p.add_mutually_exclusive_group()
    pin.add_argument("--check", metavar="FILE", help="compare with a pinned plan: exit 1 with a diff when it changed")
    pin.add_argument("--write", metavar="FILE", help="write (or update) the pinned plan file")
    from ..backends.registry import BACKENDS  # stdlib only: the backends themselves load when chosen

    p.add_argument("--dryrun", action="store_true",
                   help="print what --backend would start or send instead of the plan (pin it with --check/--write)")
    p.add_argument("--backend", choices=list(BACKENDS),
                   help="with --dryrun: the backend (default: process for local instance types, else sagemaker)")
    p.add_argument("--request", action="store_true", help="the same as --dryrun --backend sagemaker")
    p.add_argument("--region", help="with --dryrun --backend sagemaker: the AWS region to fill in (default: the job "
                                    "file's region)")
    p.add_argument("--slurm", action="store_true", help="the same as --dryrun --backend slurm")
    p.add_argument("--flavour", choices=FLAVOURS,
                   help="with --dryrun --backend kubernetes: the objects to render (default: trainjob)")
    p.add_argument("--wire", choices=("smdist", "v3"), default="smdist",
                   help="with --request: the request's shape, smdist (what submit sends; default) or v3 (what "
                        "SageMaker SDK v3's ModelTrainer would send for this job)")
    return p


def _normalize(args: argparse.Namespace) -> None:
    """The older flags as what they stand for."""
    if getattr(args, "request", False):
        args.dryrun, args.backend = True, args.backend or "sagemaker"
    if getattr(args, "slurm", False):
        args.dryrun, args.backend = True, args.backend or "slurm"


def _usage_problem(args: argparse.Namespace) -> ValidationError | None:
    # the older flags (--request, --slurm) keep their own rules and messages
    if getattr(args, "slurm", False) and (args.request or args.host):
        return ValidationError([ErrorItem("--slurm", "cannot be combined with --request or --host: the sbatch script "
                                                     "is for the whole job")])
    if args.host and (args.check or args.write):
        return ValidationError([ErrorItem("--host",
                                          "cannot be combined with --check/--write: a pinned plan holds every host")])
    if args.request and (args.host or args.check or args.write):
        return ValidationError([ErrorItem("--request",
                                          "cannot be combined with --host, --check or --write: the request "
                                          "is for the whole job and is not pinned")])
    if args.dryrun and args.host:
        return ValidationError([ErrorItem("--host",
                                          "cannot be combined with --dryrun: a dry run is for the whole job")])
    if args.backend and not args.dryrun:
        return ValidationError([ErrorItem("--backend", "is only used with --dryrun", args.backend)])
    if getattr(args, "wire", "smdist") != "smdist" and not (args.request or (args.dryrun
                                                                             and args.backend == "sagemaker")):
        return ValidationError([ErrorItem("--wire", "is only used with --request (or --dryrun --backend sagemaker)",
                                          args.wire)])
    if getattr(args, "flavour", None) and not (args.dryrun and args.backend == "kubernetes"):
        return ValidationError([ErrorItem("--flavour", "is only used with --dryrun --backend kubernetes",
                                          args.flavour)])
    if args.region is not None:
        from ..jobspec.rules.arguments import region_problem

        sagemaker = args.request or (args.dryrun and args.backend == "sagemaker")
        why = (region_problem(args.region) if sagemaker
               else "is only used with --request (or --dryrun --backend sagemaker)")
        if why:
            return ValidationError([ErrorItem("--region", why, args.region)])
    return None


def _render(data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def _host_text(plan_dict: dict[str, Any], host: str, fmt: str) -> str:
    return _render(next(h for h in plan_dict["hosts"] if h["name"] == host), fmt)


def _pinned(plan: LaunchPlan, args: argparse.Namespace) -> int:
    from ..plan import snapshot

    path = args.check or args.write
    rendered = snapshot.render(plan, snapshot.format_for(path, args.format))
    if args.write:
        changed = snapshot.write(rendered, path)
        show(f"{path}: {'written' if changed else 'unchanged'}")
        return EXIT_OK
    result = snapshot.check(rendered, path)
    if result.diff:
        show(result.message().split("\n", 1)[0])
        show(result.diff, syntax="diff")
    else:
        show(result.message())
    return EXIT_OK if result.matches else EXIT_DIFFERS


def _dryrun(plan: LaunchPlan, loaded: LoadedJob, args: argparse.Namespace) -> int:
    """What the backend would start or send, shown or pinned."""
    from ..backends import registry
    from ..estimators.submission import build_submission
    from ..plan import snapshot

    assert loaded.args is not None  # load_job always sets it
    try:
        named = registry.get(args.backend) if args.backend else None
        # a backend that runs ml.* types checks the job itself (SageMaker's preflight names what it cannot run)
        backend = named if named is not None and "ml" in named.runs else registry.for_job(args.backend,
                                                                                          plan.instance_types)
        options: dict[str, Any] = {"region": args.region} if backend.name == "sagemaker" else {}
        if backend.name == "kubernetes" and getattr(args, "flavour", None):
            options = {"flavour": args.flavour}
        dry = backend.dryrun(build_submission(loaded.args, plan), options)
        if getattr(args, "wire", "smdist") == "v3":
            from ..backends.sagemaker.request_v3 import render_v3_request

            dry = dry.model_copy(update={"content": render_v3_request(dry.submission, args.region)})
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    except ValueError as exc:
        return report_invalid(args.job_file, ValidationError([ErrorItem("--backend", str(exc), args.backend)]))
    path = args.check or args.write
    fmt = args.format or (snapshot.format_for(path, None) if path and not isinstance(dry.content, str) else "yaml")
    text = dry.render(fmt)
    syntax = dry.syntax if isinstance(dry.content, str) else fmt
    if path is None:
        show(text, syntax=syntax)
        return EXIT_OK
    if args.write:
        show(f"{path}: {'written' if snapshot.write(text, path) else 'unchanged'}")
        return EXIT_OK
    result = snapshot.check(text, path)
    show(result.message().split("\n", 1)[0])
    if result.diff:
        show(result.diff, syntax="diff")
    return EXIT_OK if result.matches else EXIT_DIFFERS


def _unknown_host(host: str, plan: LaunchPlan) -> ValidationError:
    names = ", ".join(plan.host_names[:8]) + (" ..." if len(plan.hosts) > 8 else "")
    return ValidationError([ErrorItem("--host", f"no host {host!r} in this plan; hosts: {names}", host)])


def _training_job_request(path: str) -> dict[str, Any] | None:
    """The CreateTrainingJob request in `path`, or None when it is not one (a job file)."""
    if not path.endswith(".json"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "AlgorithmSpecification" in data else None


def request_plan(request: dict[str, Any]) -> LaunchPlan:
    """The plan smdist serve runs for a CreateTrainingJob request (ValidationError with key paths otherwise)."""
    from ..serve.container_jobs import container_plan, is_container_command

    if is_container_command(request):
        return container_plan(request)
    from pathlib import Path

    from ..serve.jobs import Settings, estimator_for

    estimator, inputs = estimator_for(request, Settings(jobs_dir=Path(".")))
    return estimator.plan(inputs, job_name=request.get("TrainingJobName"))


def _job_plan(loaded: LoadedJob | None) -> LaunchPlan:
    assert loaded is not None
    return loaded.plan()


def run(args: argparse.Namespace) -> int:
    usage = _usage_problem(args)
    _normalize(args)
    if usage is not None:
        return report_invalid(args.job_file, usage)
    request = _training_job_request(args.job_file)
    if request is not None and args.dryrun:
        return report_invalid(args.job_file, ValidationError([ErrorItem(
            "--dryrun", "takes a job file: a CreateTrainingJob request is already what would be sent")]))
    loaded = load_or_report(args.job_file) if request is None else None
    if isinstance(loaded, int):
        return loaded
    try:
        plan = request_plan(request) if request is not None else _job_plan(loaded)
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    if args.dryrun:
        assert loaded is not None
        return _dryrun(plan, loaded, args)
    if args.check or args.write:
        return _pinned(plan, args)
    fmt = args.format or "yaml"
    if args.host:
        if args.host not in plan.host_names:
            return report_invalid(args.job_file, _unknown_host(args.host, plan))
        show(_host_text(plan.to_dict(), args.host, fmt), syntax=fmt)
    else:
        show(plan.to_yaml() if fmt == "yaml" else plan.to_json(), syntax=fmt)
    return EXIT_OK
