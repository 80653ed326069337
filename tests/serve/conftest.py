"""A real `smdist serve` process (with moto's server as its S3) and boto3 clients pointed at both."""
from __future__ import annotations

import contextlib
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.moto_s3 import _free_port, moto_endpoint  # noqa: F401 - the shared moto server fixture

REGION = "us-east-1"


class Served(str):
    """A running serve's URL, with its jobs folder and the client environment it printed (its `export` line)."""

    jobs: Path
    client_env: dict[str, str]


def client_environment(log: Path) -> dict[str, str]:
    """The variables of the one `export ...` line serve prints for its clients."""
    line = next(line for line in log.read_text().splitlines() if line.startswith("export "))
    return dict(word.split("=", 1) for word in shlex.split(line[len("export "):]))


def _answers_and_closes(port: int) -> bool:
    """Whether serve answers an unsigned request (refused: it is up) and then closes the connection. Read to the
    close, the probe holds none of serve's connection slots when the tests begin (serve frees a slot before it closes
    the connection: server.BoundedHTTPServer._work)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
            probe.settimeout(60)
            probe.sendall(f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n".encode())
            answer = b""
            while chunk := probe.recv(65536):
                answer += chunk
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.1 ")


@contextlib.contextmanager
def running_serve(moto_endpoint: str, jobs: Path, backend: str, *extra: str,  # noqa: F811
                  credentials: Path | None = None, python: str = sys.executable,
                  environ: dict[str, str] | None = None) -> Iterator[Served]:
    """A `smdist serve --backend BACKEND` process; its URL once it answers. It writes its key into `credentials`
    (default: a file in `jobs`), never into this user's ~/.aws."""
    port = _free_port()
    env = {**os.environ, **(environ or {}), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_REGION": REGION,
           "SMDIST_JOBS_DIR": str(jobs), "AWS_SHARED_CREDENTIALS_FILE": str(credentials or jobs / "credentials")}
    log = open(jobs / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([python, "-m", "smdist_launcher.cli.main", "serve", "--port", str(port),
                             "--s3-endpoint-url", moto_endpoint, "--backend", backend, *extra],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # ready when it answers; a dead server fails the fixture instead of hanging
            if proc.poll() is not None:
                pytest.fail(f"smdist serve exited with {proc.returncode}: {(jobs / 'serve.log').read_text()}")
            if _answers_and_closes(port):
                break
            time.sleep(0.1)
        served = Served(url)
        served.jobs = jobs
        served.client_env = client_environment(jobs / "serve.log")
        yield served
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def use_client_environment(monkeypatch: pytest.MonkeyPatch, served: Served, moto_endpoint: str) -> None:  # noqa: F811
    """The documented client set-up: serve's `export` line, S3 at moto, no key variables (they win over a profile).
    As in a fresh shell: boto3's default session (it keeps the credentials it first found) starts anew."""
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {**served.client_env, "AWS_ENDPOINT_URL_S3": moto_endpoint}.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def serve_endpoint(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:  # noqa: F811
    with running_serve(moto_endpoint, tmp_path_factory.mktemp("serve-jobs"), "process") as url:
        yield url


@pytest.fixture()
def clients(serve_endpoint: Served, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    import boto3

    use_client_environment(monkeypatch, serve_endpoint, moto_endpoint)
    return {s: boto3.client(s, region_name=REGION) for s in ("sagemaker", "logs", "s3")}
