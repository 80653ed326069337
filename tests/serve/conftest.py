"""A real `smdist serve` process (with moto's server as its S3) and boto3 clients pointed at both."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.moto_s3 import _free_port, moto_endpoint  # noqa: F401 - the shared moto server fixture

REGION = "us-east-1"


@contextlib.contextmanager
def running_serve(moto_endpoint: str, jobs: Path, backend: str) -> Iterator[str]:  # noqa: F811
    """A `smdist serve --backend BACKEND` process; its URL once it answers."""
    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": REGION,
           "SMDIST_JOBS_DIR": str(jobs)}
    log = open(jobs / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "smdist_launcher.cli.main", "serve", "--port", str(port),
                             "--s3-endpoint-url", moto_endpoint, "--backend", backend],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # ready when it answers; a dead server fails the fixture instead of hanging
            if proc.poll() is not None:
                pytest.fail(f"smdist serve exited with {proc.returncode}: {(jobs / 'serve.log').read_text()}")
            try:
                urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=1)
            except urllib.error.HTTPError:
                break  # an API error answer: it is up
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def serve_endpoint(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # noqa: F811
    with running_serve(moto_endpoint, tmp_path_factory.mktemp("serve-jobs"), "process") as url:
        yield url


@pytest.fixture()
def clients(serve_endpoint: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    import boto3

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
                       "AWS_ENDPOINT_URL_SAGEMAKER": serve_endpoint, "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": serve_endpoint,
                       "AWS_ENDPOINT_URL_S3": moto_endpoint}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return {s: boto3.client(s, region_name=REGION) for s in ("sagemaker", "logs", "s3")}
