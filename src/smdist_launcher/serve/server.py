"""The HTTP side: POST / with an X-Amz-Target, JSON in and out (1.1; CloudWatch's 1.0); one thread per request.

Every request is checked before anything runs: its Host must be this serve's address (auth.check_host) and it must be
signed with serve's key (auth.verify). No CORS headers are ever sent, so no web page can read an answer."""
from __future__ import annotations

import json
import os
import shlex
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .auth import KeyPair, check_host, own_host_names, verify
from .jobs import Jobs, Settings
from .logs import LogStreams
from .metrics import JobMetrics
from .protocol import ApiError, content_type, encode, parse_target, validate


class Endpoint:
    """Operation name → answer."""

    def __init__(self, settings: Settings) -> None:
        self.jobs = Jobs(settings)
        self.logs = LogStreams(self.jobs)
        self.metrics = JobMetrics(self.jobs)
        self.operations = {
            ("sagemaker", "CreateTrainingJob"): self.jobs.create,
            ("sagemaker", "DescribeTrainingJob"):
                lambda p: self.metrics.with_final_metrics(self.jobs.describe(p["TrainingJobName"])),
            ("sagemaker", "StopTrainingJob"): lambda p: self.jobs.stop(p["TrainingJobName"]),
            ("sagemaker", "ListTrainingJobs"): self.jobs.summaries,
            ("sagemaker", "ListTags"): self.jobs.tags,
            ("logs", "DescribeLogStreams"): self.logs.describe_streams,
            ("logs", "GetLogEvents"): self.logs.get_events,
            ("cloudwatch", "ListMetrics"): self.metrics.list_metrics,
            ("cloudwatch", "GetMetricStatistics"): self.metrics.statistics,
            ("cloudwatch", "GetMetricData"): self.metrics.metric_data,
        }

    def call(self, target: str, body: bytes) -> tuple[int, bytes]:
        try:
            service, operation = parse_target(target)
            try:
                params = json.loads(body or b"{}")
            except ValueError:
                raise ApiError("SerializationException", "the request body is not JSON") from None
            validate(service, operation, params)
            handler = self.operations.get((service, operation))
            if handler is None:
                raise ApiError("UnknownOperationException", f"smdist serve does not implement {operation}")
            return 200, json.dumps(encode(handler(params))).encode()
        except ApiError as exc:
            return exc.status, exc.body()
        except Exception as exc:  # noqa: BLE001 - the API's error shape, never a Python traceback on the wire
            return 500, ApiError("InternalFailure", f"{type(exc).__name__}: {exc}", 500).body()


MAX_BODY = 16 * 2**20  # the largest request read (a CreateTrainingJob is a few KiB): no memory for the asking


def _handler(endpoint: Endpoint, keys: KeyPair, allowed_hosts: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # http.server's name
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True  # the body is not read: the connection cannot be reused
                self._answer(413, ApiError("SerializationException", "request body too large or unreadable",
                                           413).body())
                return
            body = self.rfile.read(length)
            try:  # who asks, before what is asked: a refused request creates, describes and stops nothing
                check_host(self.headers.get("Host"), allowed_hosts, self.connection.getsockname()[0])
                verify("POST", self.path, self.headers, body, keys)
            except ApiError as exc:
                self._answer(exc.status, exc.body())
                return
            target = self.headers.get("X-Amz-Target", "")
            status, answer = endpoint.call(target, body)
            self._answer(status, answer, content_type(target))

        def _refuse_method(self) -> None:
            # GET from a browser tab, OPTIONS preflights, ...: the API is POST only; no Access-Control-* header
            self.close_connection = True
            self._answer(405, ApiError("UnknownOperationException", f"{self.command} is not supported", 405).body())

        do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _refuse_method

        def _answer(self, status: int, body: bytes, kind: str = "application/x-amz-json-1.1") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amzn-RequestId", "smdist-serve")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # http.server's signature
            sys.stderr.write(f"[smdist serve] {self.address_string()} {format % args}\n")

    return Handler


def make_server(host: str, port: int, settings: Settings, keys: KeyPair,
                allowed_hosts: list[str] | tuple[str, ...] = ()) -> tuple[ThreadingHTTPServer, Endpoint]:
    endpoint = Endpoint(settings)
    server = ThreadingHTTPServer((host, port), _handler(endpoint, keys, own_host_names(host, allowed_hosts)))
    server.daemon_threads = True
    return server, endpoint


def is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def client_line(url: str, profile: str, region: str, credentials: Path | None) -> str:
    """The one line a client shell needs: the profile serve wrote and where to send SageMaker, Logs and CloudWatch
    (metrics) calls."""
    env = {"AWS_PROFILE": profile}
    if credentials is not None:  # not the default ~/.aws/credentials: the client must read the same file
        env["AWS_SHARED_CREDENTIALS_FILE"] = str(credentials)
    env.update(AWS_DEFAULT_REGION=region, AWS_ENDPOINT_URL_SAGEMAKER=url, AWS_ENDPOINT_URL_CLOUDWATCH_LOGS=url,
               AWS_ENDPOINT_URL_CLOUDWATCH=url)
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def serve(host: str, port: int, jobs_dir: str | Path, *, keys: KeyPair, profile: str, credentials: Path | None,
          region: str = "us-east-1", processes_per_host: int | None = None, backend: str = "process",
          backend_why: str = "", run_as: str | None = None, allowed_hosts: tuple[str, ...] = ()) -> None:
    server, endpoint = make_server(host, port, Settings(jobs_dir=Path(jobs_dir), region=region,
                                                 processes_per_host=processes_per_host, backend=backend,
                                                 run_as=run_as), keys, allowed_hosts)
    bound = server.server_address[1]
    local = host if is_loopback(host) else "127.0.0.1"
    url = f"http://{local if ':' not in local else f'[{local}]'}:{bound}"
    print(f"[smdist serve] SageMaker training API on http://{host}:{bound} (jobs in {jobs_dir}); every request "
          f"must be signed with the key of profile {profile!r}", flush=True)
    if not is_loopback(host):
        print(f"[smdist serve] WARNING: listening on {host}, beyond loopback, over plain HTTP: requests are signed "
              "(no one without the key can call) but not encrypted (job requests, environment values and logs can "
              "be read on the network). Put a TLS proxy in front (docs/security.md)", flush=True)
    who = f"as user {run_as}" if run_as else "as this user (the one serve runs as)"
    print(f"[smdist serve] jobs run with the {backend} backend ({backend_why or 'asked for'}), {who}", flush=True)
    if run_as is None and hasattr(os, "geteuid") and os.geteuid() == 0:
        print("[smdist serve] WARNING: serve runs as root and so would every job's code: start it with "
              "--run-as USER (an unprivileged user) to run jobs as that user", flush=True)
    print("[smdist serve] clients (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment win over a profile: "
          "unset them):", flush=True)
    print(client_line(url, profile, region, credentials), flush=True)
    from ..backends.toolkit.supervisor import Interrupted, stop_signals_interrupt

    restore = stop_signals_interrupt()  # SIGTERM/SIGHUP end serve like Ctrl-C: the exit stops running jobs in order
    try:
        server.serve_forever()
    except Interrupted:
        pass
    finally:
        server.server_close()
        endpoint.jobs.stop_all("stopped: smdist serve is exiting")  # all at once: each keeps its outputs and record
        restore()
