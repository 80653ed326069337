"""``smdist serve [--port 8080] [--s3-endpoint-url URL]``: a SageMaker-compatible endpoint on this machine.

CreateTrainingJob / DescribeTrainingJob / StopTrainingJob / ListTrainingJobs, the CloudWatch Logs reads of
training jobs and their CloudWatch metric reads (ListMetrics, GetMetricStatistics); each job runs on this machine with
--backend (auto: docker when its engine and image are there, else process). Point boto3 or the SageMaker SDK at it
(endpoint_url, or AWS_ENDPOINT_URL_SAGEMAKER, AWS_ENDPOINT_URL_CLOUDWATCH_LOGS and AWS_ENDPOINT_URL_CLOUDWATCH) and S3
at the same S3 server.

Every request must be signed (AWS SigV4) with serve's key: at start serve writes it as profile --profile (default
smdist-serve) into this user's shared credentials file ($AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, mode 0600)
and prints the one `export ...` line a client needs. A key of your own: SMDIST_SERVE_ACCESS_KEY_ID and
SMDIST_SERVE_SECRET_ACCESS_KEY in serve's environment. Jobs run as the serving user unless --run-as USER."""
from __future__ import annotations

import argparse
import dataclasses
import os

from ..serve.connections import DEFAULT_LIMITS
from .console import problem

MAX_REQUEST_TIMEOUT_S = 3600


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="a SageMaker-compatible training API on this machine",
                              description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; beyond loopback traffic is plain HTTP: see "
                        "docs/security.md for a TLS proxy)")
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
    p.add_argument("--profile", default="smdist-serve",
                   help="profile serve writes its key into, in the shared credentials file (default smdist-serve)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="another name clients reach serve by (a TLS proxy's); requests whose Host is not serve's own "
                        "address are refused")
    p.add_argument("--max-connections", type=int, default=DEFAULT_LIMITS.max_connections, metavar="N",
                   help=f"connections served at once (default {DEFAULT_LIMITS.max_connections}); when all are taken, "
                        "the one that has waited longest for a request's headers is closed for a new one, and when "
                        "none is waiting the new one is answered 503 (docs/security.md)")
    p.add_argument("--request-timeout", type=float, default=DEFAULT_LIMITS.request_timeout_s, metavar="SECONDS",
                   help=f"time a client has to send a request's headers (an idle kept-alive connection too), then "
                        f"again its body (default {DEFAULT_LIMITS.request_timeout_s:g}); bodies over "
                        f"{DEFAULT_LIMITS.max_body_bytes // 2**20} MiB are refused")
    p.add_argument("--run-as", metavar="USER",
                   help="run every job's processes as USER, their host folders owned by it (process backend; serve "
                        "must run as root). Recommended whenever serve runs as root")
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends.registry import choose
    from ..backends.toolkit.jobdir import jobs_root
    from ..serve.server import serve

    try:  # a backend that cannot run here stops serve now, not the first job
        backend, why = choose(args.backend)
    except ValueError as e:
        problem(f"smdist serve: {e}")
        return 2
    if args.s3_endpoint_url:
        os.environ["SMDIST_S3_ENDPOINT_URL"] = args.s3_endpoint_url  # the local backend and the hosts read it
    from ..serve.auth import key_pair_from, new_key_pair
    from ..serve.credentials_file import credentials_file, write_profile

    if args.run_as is not None:
        why_not = run_as_problem(args.run_as, backend)
        if why_not:
            problem(f"smdist serve: --run-as {args.run_as}: {why_not}")
            return 2
    # before the credentials file is touched; a timeout socket.settimeout cannot take (inf, 1e300) would fail every
    # connection with OverflowError
    if args.max_connections < 1 or not 0 < args.request_timeout <= MAX_REQUEST_TIMEOUT_S:
        problem(f"smdist serve: --max-connections must be at least 1 and --request-timeout above 0 and at most "
                f"{MAX_REQUEST_TIMEOUT_S} seconds (got {args.max_connections}, {args.request_timeout})")
        return 2
    try:
        keys = key_pair_from(os.environ) or new_key_pair()
        path = credentials_file(os.environ)
        write_profile(path, args.profile, keys)
    except (OSError, ValueError) as e:
        problem(f"smdist serve: cannot write the key into the credentials file: {e}")
        return 2
    limits = dataclasses.replace(DEFAULT_LIMITS, max_connections=args.max_connections,
                                 request_timeout_s=args.request_timeout)
    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    serve(args.host, args.port, jobs_root(args.jobs_dir), region=region, processes_per_host=args.processes_per_host,
          backend=backend, backend_why=why, keys=keys, profile=args.profile,
          credentials=path if os.environ.get("AWS_SHARED_CREDENTIALS_FILE") else None, run_as=args.run_as,
          allowed_hosts=tuple(args.allowed_host), limits=limits)
    return 0


def run_as_problem(user: str, backend: str) -> str | None:
    """Why jobs cannot be run as `user` here (one line), None when they can."""
    import pwd

    if backend != "process":
        return f"works with --backend process only (this serve uses {backend})"
    if os.geteuid() != 0:
        return "serve must run as root to start processes as another user"
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return f"no user named {user!r} on this machine"
    # Each host runs this Python as that user: find out now, not at the first job, whether it can.
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", "import smdist_launcher.container"], user=entry.pw_uid,
                              group=entry.pw_gid, extra_groups=[], cwd="/", capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        done = subprocess.CompletedProcess([], 1, "", str(e))
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["it failed"])[-1]
        return (f"user {user} cannot run {sys.executable} with smdist-launcher ({why}); install it where that user "
                "can read and run it (a venv outside /root, e.g. /opt/smdist)")
    return None
