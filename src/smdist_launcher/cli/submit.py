"""``smdist submit job.yaml [--wait] [--job-name NAME] [--region R]``: run a job file on Amazon SageMaker.

``--backend kubernetes [--flavour F --namespace NS --image URI ...]`` runs it on a Kubernetes cluster instead (the
objects `smdist plan --dryrun --backend kubernetes` shows).

Submits the job (validation, code upload, CreateTrainingJob), records it in the jobs folder so `smdist jobs`,
`status`, `stop` and `logs` find it, prints its name and returns; --wait follows it to the end (status transitions
and every host's logs). Exit codes: 0 submitted / completed, 1 failed or stopped, 2 invalid input."""
from __future__ import annotations

import argparse

from ..errors import JobFailedError, ValidationError
from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK, report_invalid
from .kubernetes_flags import add_kubernetes_flags, kubernetes_flags, refuse_kubernetes_flags

EXIT_FAILED = 1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("submit", help="run a job file on Amazon SageMaker (ml.* instance types)",
                              description=__doc__.splitlines()[0])
    p.add_argument("job_file", help="YAML job file (estimator arguments + framework)")
    p.add_argument("--wait", action="store_true", help="follow the job to its end (status and logs)")
    p.add_argument("--no-logs", action="store_true", help="with --wait: status only, no CloudWatch logs")
    p.add_argument("--job-name", help="job name (default: <base_job_name>-<timestamp>)")
    p.add_argument("--region", help="AWS region (default: the job file's region, else $AWS_REGION / the profile)")
    p.add_argument("--jobs-dir", help="where the submission is recorded (default: as for `smdist run`)")
    p.add_argument("--backend", choices=("sagemaker", "kubernetes"), default="sagemaker",
                   help="where the job runs: sagemaker (default) or kubernetes (a cluster; any instance type)")
    add_kubernetes_flags(p)
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends import registry
    from ..backends.toolkit.jobdir import jobs_root
    from ..estimators import estimator_from_job_file
    from ..estimators.job_names import name_from_base
    from ..jobspec.catalog import is_local
    from ..jobspec.rules.context import cluster_of

    try:
        est = estimator_from_job_file(args.job_file, overrides={"region": args.region} if args.region else None)
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    kubernetes = getattr(args, "backend", "sagemaker") == "kubernetes"
    try:
        if not kubernetes:
            refuse_kubernetes_flags(args)
    except ValueError as exc:
        problem(f"{args.job_file}: {exc}")
        return EXIT_INVALID
    instance_type, _ = cluster_of(est.spec)   # instance groups: all local or none (spec rule)
    if is_local(instance_type or "") and not kubernetes:   # a cluster's pods run any instance type's plan
        problem(f"{args.job_file}: instance_type: {instance_type!r} runs on this machine; use `smdist run`")
        return EXIT_INVALID
    job_name = args.job_name or (est.job_file.job_name if est.job_file else None) or name_from_base(est.base_job_name)
    try:
        plan = est.plan(job_name=job_name)
        backend = registry.get(args.backend if kubernetes else "sagemaker")
        options = kubernetes_flags(args) if kubernetes else None
        job = backend.submit(backend.dryrun(est.submission(plan), options), wait=False,
                             jobs_root=jobs_root(args.jobs_dir))
    except ValidationError as exc:
        return report_invalid(args.job_file, exc)
    except RuntimeError as exc:   # the API server refused or is unreachable (backends.kubernetes.cluster)
        problem(f"{args.job_file}: {exc}")
        return EXIT_FAILED
    print(job.job_name, flush=True)
    if not args.wait:
        return EXIT_OK
    try:
        job.wait(logs=not args.no_logs)
    except JobFailedError as exc:
        problem(str(exc))
        return EXIT_FAILED
    return EXIT_OK
