"""The HTTP side: POST / with an X-Amz-Target, JSON 1.1 in and out; one thread per request."""
from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .jobs import Jobs, Settings
from .logs import LogStreams
from .protocol import ApiError, encode, parse_target, validate


class Endpoint:
    """Operation name → answer."""

    def __init__(self, settings: Settings) -> None:
        self.jobs = Jobs(settings)
        self.logs = LogStreams(self.jobs)
        self.operations = {
            ("sagemaker", "CreateTrainingJob"): self.jobs.create,
            ("sagemaker", "DescribeTrainingJob"): lambda p: self.jobs.describe(p["TrainingJobName"]),
            ("sagemaker", "StopTrainingJob"): lambda p: self.jobs.stop(p["TrainingJobName"]),
            ("sagemaker", "ListTrainingJobs"): self.jobs.summaries,
            ("sagemaker", "ListTags"): self.jobs.tags,
            ("logs", "DescribeLogStreams"): self.logs.describe_streams,
            ("logs", "GetLogEvents"): self.logs.get_events,
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


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            status, body = endpoint.call(self.headers.get("X-Amz-Target", ""), self.rfile.read(length))
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amzn-RequestId", "smdist-serve")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            sys.stderr.write(f"[smdist serve] {self.address_string()} {format % args}\n")

    return Handler


def make_server(host: str, port: int, settings: Settings) -> tuple[ThreadingHTTPServer, Endpoint]:
    endpoint = Endpoint(settings)
    server = ThreadingHTTPServer((host, port), _handler(endpoint))
    server.daemon_threads = True
    return server, endpoint


def serve(host: str, port: int, jobs_dir: str | Path, *, region: str = "us-east-1",
          processes_per_host: int | None = None, backend: str = "process", backend_why: str = "") -> None:
    server, _ = make_server(host, port, Settings(jobs_dir=Path(jobs_dir), region=region,
                                                 processes_per_host=processes_per_host, backend=backend))
    print(f"[smdist serve] SageMaker training API on http://{host}:{server.server_address[1]} "
          f"(jobs in {jobs_dir})", flush=True)
    print(f"[smdist serve] jobs run with the {backend} backend ({backend_why or 'asked for'})", flush=True)
    from ..backends.local.supervisor import Interrupted, stop_signals_interrupt

    restore = stop_signals_interrupt()  # SIGTERM/SIGHUP end serve like Ctrl-C: the exit stops running jobs in order
    try:
        server.serve_forever()
    except Interrupted:
        pass
    finally:
        server.server_close()
        restore()
