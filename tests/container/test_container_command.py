"""A container-command host (container/container_command.py, container_init.py): the command as given, ended like
a container, with what v3's drivers expect on PATH and a private /opt/ml required."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smdist_launcher.container.container_command import (
    NoPrivateOptMl,
    command_argv,
    command_env,
    own_failure_lines,
    require_private_opt_ml,
)


def test_the_argv_is_the_requests_own_under_init() -> None:
    argv = command_argv({"name": "algo-1", "argv": ["/bin/bash", "-c", "echo algo-1 $X"]})
    assert argv[-4:] == ["--", "/bin/bash", "-c", "echo algo-1 $X"]   # no host-name mapping, no quoting
    with pytest.raises(ValueError, match="non-empty argv"):
        command_argv({"name": "algo-1", "argv": []})


def test_the_host_ends_when_its_command_does_and_leftovers_are_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    # a daemon that keeps the output pipe open, as v3's `sshd -D` does, then the command exits 3
    script = f"sleep 300 & echo $! > {pid_file}; echo done; exit 3"
    argv = command_argv({"name": "algo-1", "argv": ["/bin/bash", "-c", script]})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "done\n")
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while Path(f"/proc/{daemon}").exists() and Path(f"/proc/{daemon}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "the leftover daemon is still running"
        time.sleep(0.1)


def test_an_entry_point_that_does_not_exist_exits_127() -> None:
    done = subprocess.run(command_argv({"name": "algo-1", "argv": ["/no/such/entrypoint"]}), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 127 and "/no/such/entrypoint" in done.stderr


def test_python3_on_path_is_the_runtimes_and_mpi_rank_cwd_is_dropped(tmp_path: Path) -> None:
    env = command_env({"PATH": "/usr/bin:/bin", "SMDIST_RANK_CWD": "/opt/ml/code"}, tmp_path / "shim")
    assert env["PATH"].split(os.pathsep)[:2] == [str(tmp_path / "shim"), os.path.dirname(sys.executable)]
    # torchrun on PATH is ours: its store outlives every agent's exit barrier (container/torchrun_agent.py)
    torchrun = shutil.which("torchrun", path=env["PATH"])
    assert torchrun == str(tmp_path / "shim" / "torchrun")
    assert "smdist_launcher.container.torchrun_agent" in Path(torchrun).read_text()
    assert "SMDIST_RANK_CWD" not in env


def test_no_private_opt_ml_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(NoPrivateOptMl, match="not running as root"):
        require_private_opt_ml(tmp_path, isolated=False, reason="not running as root")
    require_private_opt_ml(tmp_path, isolated=True, reason="")   # a private mount namespace: fine


def test_the_commands_own_failure_file_is_its_reason(tmp_path: Path) -> None:
    assert own_failure_lines(tmp_path) == []
    (tmp_path / "failure").write_text("Traceback ...\n\nValueError: bad shard\n")
    assert own_failure_lines(tmp_path) == ["Traceback ...", "ValueError: bad shard"]
