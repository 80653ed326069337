"""``smdist plan job.yaml [--format yaml|json] [--host algo-2] [--check FILE | --write FILE] [--request [--region R]]``.

Prints the launch plan (secrets redacted). ``--check`` compares with a pinned plan file: exit 1 and a unified diff
when it changed; ``--write`` (re)writes the pinned file. The pinned file's format follows its extension.
``--request`` prints the CreateTrainingJob request the SageMaker backend would send instead (secrets redacted, no AWS
call): ``<account>`` and, without ``--region`` or a region in the job file, ``<region>`` are placeholders.
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError
from .console import show
from .job_loading import EXIT_DIFFERS, EXIT_OK, LoadedJob, load_or_report, report_invalid

if TYPE_CHECKING:  # pragma: no cover
    from ..plan.model import LaunchPlan


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help="print the launch plan of a job file, or check/update a pinned plan",
                              description="Print what would run on each host. Nothing is uploaded or started.")
    p.add_argument("job_file", help="YAML job file (estimator arguments + framework)")
    p.add_argument("--format", choices=("yaml", "json"), help="output format (default: yaml; for --check/--write: the file's extension)")
    p.add_argument("--host", metavar="NAME", help="show only this host's part (e.g. algo-2)")
    pin = p.add_mutually_exclusive_group()
    pin.add_argument("--check", metavar="FILE", help="compare with a pinned plan: exit 1 with a diff when it changed")
    pin.add_argument("--write", metavar="FILE", help="write (or update) the pinned plan file")
    p.add_argument("--request", action="store_true",
                   help="print the SageMaker CreateTrainingJob request instead of the plan (no AWS call, secrets redacted)")
    p.add_argument("--region", help="with --request: the AWS region to fill in (default: the job file's region)")
    p.add_argument("--slurm", action="store_true",
                   help="print the sbatch script `smdist run --backend slurm` would submit (pin it with --check/--write)")
    return p


def _usage_problem(args: argparse.Namespace) -> ValidationError | None:
    if getattr(args, "slurm", False) and (args.request or args.host):
        return ValidationError([ErrorItem("--slurm", "cannot be combined with --request or --host: the sbatch script "
                                                     "is for the whole job")])
    if args.host and (args.check or args.write):
        return ValidationError([ErrorItem("--host", "cannot be combined with --check/--write: a pinned plan holds every host")])
    if args.request and (args.host or args.check or args.write):
        return ValidationError([ErrorItem("--request", "cannot be combined with --host, --check or --write: the request "
                                                       "is for the whole job and is not pinned")])
    if args.region is not None:
        from ..jobspec.rules.arguments import region_problem

        why = region_problem(args.region) if args.request else "is only used with --request"
        if why:
            return ValidationError([ErrorItem("--region", why, args.region)])
    return None


def _request_text(plan: LaunchPlan, loaded: LoadedJob, region: str | None, fmt: str) -> str:
    from ..estimators.sagemaker_request import sagemaker_request

    assert loaded.args is not None  # load_job always sets it
    return _render(sagemaker_request(plan, loaded.args, region=region), fmt)


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


def _slurm(plan: LaunchPlan, args: argparse.Namespace) -> int:
    """The sbatch script (default Slurm options: the job's own max_run and GPUs), shown or pinned."""
    from ..backends.slurm.script import sbatch_script
    from ..plan import snapshot

    text = sbatch_script(plan)
    path = args.check or args.write
    if path is None:
        show(text, syntax="bash")
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


def run(args: argparse.Namespace) -> int:
    usage = _usage_problem(args)
    if usage is not None:
        return report_invalid(args.job_file, usage)
    loaded = load_or_report(args.job_file)
    if isinstance(loaded, int):
        return loaded
    try:
        plan = loaded.plan()
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    if getattr(args, "slurm", False):
        return _slurm(plan, args)
    if args.check or args.write:
        return _pinned(plan, args)
    fmt = args.format or "yaml"
    if args.request:
        try:
            text = _request_text(plan, loaded, args.region, fmt)
        except ValidationError as exc:
            return report_invalid(args.job_file, exc)
        show(text, syntax=fmt)
        return EXIT_OK
    if args.host:
        if args.host not in plan.host_names:
            return report_invalid(args.job_file, _unknown_host(args.host, plan))
        show(_host_text(plan.to_dict(), args.host, fmt), syntax=fmt)
    else:
        show(plan.to_yaml() if fmt == "yaml" else plan.to_json(), syntax=fmt)
    return EXIT_OK
