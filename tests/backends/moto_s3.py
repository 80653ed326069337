"""Fixtures: a real moto S3 server on 127.0.0.1 (free port) for the s3:// paths of local mode."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # ready when it answers; a dead server fails the fixture instead of hanging
            if proc.poll() is not None:
                pytest.fail(f"moto_server exited with {proc.returncode}")
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.fixture
def s3(moto_endpoint, monkeypatch: pytest.MonkeyPatch):
    """A boto3 client on the moto server, with the environment local mode reads set to match."""
    import boto3

    for key, value in {"SMDIST_S3_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    bucket = f"bucket-{os.getpid()}-{time.monotonic_ns()}"
    client.create_bucket(Bucket=bucket)
    client.bucket = bucket  # type: ignore[attr-defined]
    return client
