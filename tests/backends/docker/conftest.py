"""Session fixtures: a private Docker engine (stopped by pid), the test base image, our image built from
docker/Dockerfile on it. Each step's duration is printed (pytest -s) so the cost stays visible."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .engine import PrivateEngine, base_rootfs_tar, import_base, missing_tools

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mnist"


@pytest.fixture(scope="session")
def docker_engine():
    if os.geteuid() != 0:
        pytest.skip("the docker backend tests start their own dockerd: they need root")
    missing = missing_tools()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/bootstrap.sh installs docker.io and debootstrap)")
    started = time.monotonic()
    engine = PrivateEngine().start()
    print(f"\n[docker] private dockerd up in {time.monotonic() - started:.1f} s")
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def smdist_image(docker_engine, tmp_path_factory) -> str:
    """smdist-train built from docker/Dockerfile on a local Debian base (debootstrap + torch's CPU wheel)."""
    from smdist_launcher.cli.main import main

    started = time.monotonic()
    tar = base_rootfs_tar()
    base = import_base(docker_engine, tar)
    print(f"[docker] base image {base} ready in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    tag = "smdist-train:test"
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = docker_engine.env["DOCKER_HOST"]
    try:
        assert main(["image", "build", "--base-image", base, "--tag", tag, "-q"]) == 0
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
    print(f"[docker] smdist image built in {time.monotonic() - started:.1f} s")
    return tag


@pytest.fixture
def use_engine(docker_engine, smdist_image, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.env["DOCKER_HOST"])
    monkeypatch.setenv("SMDIST_DOCKER_IMAGE", smdist_image)
    return docker_engine


