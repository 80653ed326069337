"""The HTTP side: POST / with an X-Amz-Target, JSON in and out (1.1; CloudWatch's 1.0).

Every request is checked before anything runs: its Host must be this serve's address (auth.check_host) and it must be
signed with serve's key, what the headers decide before the body is read (auth.authenticate_headers), the signature
over the body after (auth.verify_body); a refused request's body is never read. Connections are bounded
(connections.py): a fixed pool of slots and worker threads, a deadline and a byte budget for a request's headers and
for its body. No CORS headers are ever sent, so no web page can read an answer."""
from __future__ import annotations

import io
import json
import os
import queue
import re
import shlex
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from .auth import KeyPair, authenticate_headers, check_host, own_host_names, verify_body
from .connections import DEFAULT_LIMITS, Admission, ConnectionLimits, DeadlineReader
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
            except (ValueError, RecursionError):
                raise ApiError("SerializationException", "the request body is not JSON (or nests too deep)") from None
            if _nesting(params) > MAX_NESTING:  # validation and handlers recurse over it: bounded before they run
                raise ApiError("SerializationException", f"the request body nests deeper than {MAX_NESTING} levels")
            validate(service, operation, params)
            handler = self.operations.get((service, operation))
            if handler is None:
                raise ApiError("UnknownOperationException", f"smdist serve does not implement {operation}")
            return 200, json.dumps(encode(handler(params))).encode()
        except ApiError as exc:
            return exc.status, exc.body()
        except Exception as exc:  # noqa: BLE001 - the API's error shape, never a Python traceback on the wire
            return 500, ApiError("InternalFailure", f"{type(exc).__name__}: {exc}", 500).body()


MAX_NESTING = 32  # levels of JSON objects/arrays: the deepest SageMaker/Logs/CloudWatch input shape has fewer than 10
_DIGITS = re.compile(r"[0-9]{1,18}")


def _nesting(value: Any) -> int:
    """How deep lists and dicts nest in `value` (without recursion: it runs before the depth is known)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_NESTING:
                return deepest
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _content_length(values: list[str]) -> int | None:
    """A request's body length; None unless every Content-Length header is the same plain decimal number
    (int() would take '+5', ' 5', '0_5'; differing repeats are how a request is smuggled past a proxy)."""
    if not values:
        return 0
    if len(set(values)) != 1 or not _DIGITS.fullmatch(values[0]):
        return None
    return int(values[0])


def printable(text: str) -> str:
    """`text` with every character a terminal could act on (C0/C1 controls, ESC, bidi overrides, line breaks)
    written as an escape, and backslashes doubled: a client cannot forge log lines or drive the operator's terminal."""
    return "".join(_escaped(c) for c in text)


def _escaped(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c.isprintable():
        return c
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _handler(endpoint: Endpoint, keys: KeyPair, allowed_hosts: frozenset[str], region: str | None,
             limits: ConnectionLimits, admission: Admission) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _reader: DeadlineReader

        def setup(self) -> None:
            super().setup()
            self._reader = DeadlineReader(self.connection)
            self.rfile = io.BufferedReader(self._reader)

        def handle(self) -> None:
            try:
                super().handle()
            except OSError:  # cut off (over its limits, evicted, gone): closed without an answer
                self.close_connection = True

        def handle_one_request(self) -> None:
            if not admission.wait_for_request(self.connection):
                self.close_connection = True  # its slot went to a newer connection
                return
            self._reader.arm(limits.request_timeout_s, limits.max_header_bytes)
            super().handle_one_request()  # a TimeoutError there closes the connection (http.server's own)

        def handle_expect_100(self) -> bool:
            return True  # "100 Continue" only once the headers passed the signature checks (do_POST)

        def flush_headers(self) -> None:
            self.connection.settimeout(limits.write_timeout_s)  # a client that does not read its answer
            super().flush_headers()

        def do_POST(self) -> None:  # http.server's name
            if not admission.start_work(self.connection):
                self.close_connection = True
                return
            keep_alive = not self.close_connection  # http.server's reading of the request's Connection/version
            self.close_connection = True  # until the request proved itself: its body is never read
            length = _content_length(self.headers.get_all("Content-Length") or [])
            if "Transfer-Encoding" in self.headers:  # present at all, even empty: a proxy may read it otherwise
                self._answer(411, ApiError("SerializationException", "send the body with a Content-Length",
                                           411).body())
                return
            if length is None:
                self._answer(400, ApiError("SerializationException", "send one Content-Length of decimal digits",
                                           400).body())
                return
            if not length <= limits.max_body_bytes:
                self._answer(413, ApiError("SerializationException", f"request body too large or unreadable "
                                                                      f"(at most {limits.max_body_bytes} bytes)",
                                           413).body())
                return
            try:  # who asks, before what is asked: a refused request creates, describes and stops nothing
                check_host(self.headers.get("Host"), allowed_hosts, self.connection.getsockname()[0])
                signed = authenticate_headers("POST", self.path, self.headers, keys, region=region)
            except ApiError as exc:
                self._answer(exc.status, exc.body())
                return
            if self.headers.get("Expect", "").lower() == "100-continue":
                self.send_response_only(100)
                self.end_headers()
            self._reader.arm(limits.request_timeout_s, length)
            body = self.rfile.read(length)
            if len(body) != length:
                return  # the client went away mid-body
            try:
                verify_body(signed, body, keys)
            except ApiError as exc:
                self._answer(exc.status, exc.body())
                return
            admission.proven(self.connection)
            self.close_connection = not keep_alive
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
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # http.server's signature
            sys.stderr.write(f"[smdist serve] {self.address_string()} {printable(format % args)}\n")

    return Handler


class BoundedHTTPServer(HTTPServer):
    """http.server with a fixed pool of worker threads, one per connection slot (connections.Admission): a
    connection over the cap takes the slot of the one that waited longest for its headers, or is answered 503."""

    request_queue_size = 128  # the listen backlog: a burst of connects is accepted and sorted out here, not dropped

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limits: ConnectionLimits,
                 admission: Admission) -> None:
        super().__init__(address, handler)
        self.admission = admission
        self._queue: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        # daemon threads: an exiting serve does not wait for a client's socket
        self._workers = [threading.Thread(target=self._work, name=f"smdist-serve-{i}", daemon=True)
                         for i in range(limits.max_connections)]
        for worker in self._workers:
            worker.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.admission.admit(request):
            _refuse_busy(request)
            return
        self._queue.put((request, client_address))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one connection's failure never ends a worker
                self.handle_error(request, client_address)
            finally:  # freed before closed: a client that sees the close finds its slot free
                self.admission.release(request)
                self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self.admission.close_all()
        for _ in self._workers:
            self._queue.put(None)


_BUSY = ApiError("ServiceUnavailable", "smdist serve is busy: every connection slot holds a request; retry", 503)


def _refuse_busy(sock: socket.socket) -> None:
    """A short answer without blocking the accepting thread, then close (botocore retries a 503)."""
    body = _BUSY.body()
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/x-amz-json-1.1\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        sock.setblocking(False)
        sock.send(head + body)
    except OSError:
        pass
    finally:
        sock.close()


def make_server(host: str, port: int, settings: Settings, keys: KeyPair,
                allowed_hosts: list[str] | tuple[str, ...] = (),
                limits: ConnectionLimits = DEFAULT_LIMITS) -> tuple[BoundedHTTPServer, Endpoint]:
    endpoint = Endpoint(settings)
    admission = Admission(limits.max_connections)
    handler = _handler(endpoint, keys, own_host_names(host, allowed_hosts), settings.region, limits, admission)
    return BoundedHTTPServer((host, port), handler, limits, admission), endpoint


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
          backend_why: str = "", run_as: str | None = None, allowed_hosts: tuple[str, ...] = (),
          limits: ConnectionLimits = DEFAULT_LIMITS) -> None:
    server, endpoint = make_server(host, port, Settings(jobs_dir=Path(jobs_dir), region=region,
                                                 processes_per_host=processes_per_host, backend=backend,
                                                 run_as=run_as), keys, allowed_hosts, limits)
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
