"""A container-command (SDK v3) request under `serve --run-as USER` on the process backend: its hosts (run as USER)
cannot make the private /opt/ml a container command needs (a mount namespace needs root), so create refuses it
with the backends that can run it, instead of accepting a job that never starts."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from smdist_launcher.serve.jobs import Settings

from .test_container_command_jobs import command_request
from .test_request_attacks import _NotRun, _refusal


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user every container command is refused already (no root)")
def test_a_container_command_under_run_as_is_refused_at_create(tmp_path: Path) -> None:
    request = command_request("smdist-attack", "cmd-run-as", "true", count=1)
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path / "jobs", run_as="nobody")), request)
    assert "AlgorithmSpecification.ContainerEntrypoint" in message and "--run-as nobody" in message, message
    assert "--backend netns or docker" in message, message
    assert not (tmp_path / "jobs" / "cmd-run-as").exists()
