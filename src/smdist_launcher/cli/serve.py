"""``smdist serve [--port 8080] [--s3-endpoint-url URL]``: a SageMaker-compatible endpoint on this machine.

CreateTrainingJob / DescribeTrainingJob / StopTrainingJob / ListTrainingJobs and the CloudWatch Logs reads of
training jobs; each job runs on this machine with --backend (auto: docker when its engine and image are there, else
process). Point boto3 or the SageMaker SDK at it (endpoint_url, or AWS_ENDPOINT_URL_SAGEMAKER and
AWS_ENDPOINT_URL_CLOUDWATCH_LOGS) and S3 at the same S3 server."""
from __future__ import annotations

import argparse
import os

from .console import problem


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="a SageMaker-compatible training API on this machine",
                              description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--s3-endpoint-url", help="S3-compatible server for code, data and models (MinIO, moto); "
                                             "default: $SMDIST_S3_ENDPOINT_URL, else AWS S3")
    p.add_argument("--region", default=None, help="region the endpoint answers for (default: $AWS_REGION or us-east-1)")
    p.add_argument("--processes-per-host", type=int, metavar="P",
                   help="processes on each simulated host (default: the job's; 1 on CPU)")
    p.add_argument("--jobs-dir", help="where job folders go (default: as for `smdist run`)")
    p.add_argument("--backend", choices=["auto", "process", "netns", "docker"], default="auto",
                   help="how each job's simulated hosts run (default auto: docker when a Docker engine answers and "
                        "the smdist image ($SMDIST_DOCKER_IMAGE or smdist-train:latest) is on it, else process; "
                        "netns only when asked for). Checked at start")
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends.local.jobdir import jobs_root
    from ..backends.registry import choose
    from ..serve.server import serve

    try:  # a backend that cannot run here stops serve now, not the first job
        backend, why = choose(args.backend)
    except ValueError as e:
        problem(f"smdist serve: {e}")
        return 2
    if args.s3_endpoint_url:
        os.environ["SMDIST_S3_ENDPOINT_URL"] = args.s3_endpoint_url  # the local backend and the hosts read it
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    serve(args.host, args.port, jobs_root(args.jobs_dir), region=region, processes_per_host=args.processes_per_host,
          backend=backend, backend_why=why)
    return 0
