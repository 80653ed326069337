"""The pieces of the real multi-host MPI path that need no second host: the forced command's requests, the
authorized_keys line, the client config, the master's verdict file, the job key and port settings."""
from __future__ import annotations

import shlex

import pytest

from smdist_launcher.container import ssh_command
from smdist_launcher.container.multihost import client_config, job_key, master_verdict, ssh_port, worker_hosts
from smdist_launcher.container.ssh_daemon import authorized_key_line
from smdist_launcher.contract import MLPaths


def test_forced_command_answers_ping_and_records_the_verdict(tmp_path, monkeypatch, capsys):
    paths = MLPaths(tmp_path)
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "smdist-ping")
    assert ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"]) == 0
    assert capsys.readouterr().out.strip() == "ok"
    assert master_verdict(paths) is None
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "smdist-done 3")
    assert ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"]) == 0
    assert master_verdict(paths) == "failed"
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "smdist-done 0")
    ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"])
    assert master_verdict(paths) == "succeeded"
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "smdist-done $(reboot)")
    assert ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"]) == 2
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "")
    assert ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"]) == 255  # no interactive shell


def test_other_commands_go_to_the_host_runtime_which_must_be_serving(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ssh_command, "DEFAULT_WAIT_S", 0.2)
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "rm -rf /")
    # no runtime serves (no run/rsh.json): refused like an unreachable host, nothing run
    assert ssh_command.main(["--root", str(tmp_path), "--host", "algo-2"]) == 255
    assert "did not start serving" in capsys.readouterr().err


def test_authorized_key_is_restricted_to_the_forced_command(tmp_path):
    root = tmp_path / 'we"ird $(x) root'
    line = authorized_key_line("ssh-ed25519 AAAAC3Nza key\n", root, "algo-2")
    options, _, key = line.strip().partition(" ssh-ed25519")
    assert options.startswith('command="') and options.endswith('",restrict')
    command = options[len('command="'):-len('",restrict')].replace('\\"', '"').replace("\\\\", "\\")
    argv = shlex.split(command)
    assert argv[1:] == ["-m", "smdist_launcher.container.ssh_command", "--root", str(root), "--host", "algo-2"]
    assert key.strip() == "AAAAC3Nza key"


def test_client_config_and_settings(tmp_path):
    text = client_config(tmp_path / "id", 20022)
    for line in ("Port 20022", f"IdentityFile {tmp_path / 'id'}", "BatchMode yes", "StrictHostKeyChecking no"):
        assert line in text
    with pytest.raises(FileNotFoundError, match="SMDIST_SSH_KEY"):
        job_key({"SMDIST_SSH_KEY": str(tmp_path / "missing")})
    (tmp_path / "k").write_text("private")
    (tmp_path / "k.pub").write_text("public")
    assert job_key({"SMDIST_SSH_KEY": str(tmp_path / "k")}) == tmp_path / "k"
    assert ssh_port({}) == 20022 and ssh_port({"SMDIST_SSH_PORT": "2022"}) == 2022
    with pytest.raises(ValueError, match="SMDIST_SSH_PORT"):
        ssh_port({"SMDIST_SSH_PORT": "ssh"})
    plan = {"hosts": [{"name": "algo-1", "role": "mpi_master"}, {"name": "algo-2", "role": "mpi_worker"}]}
    assert worker_hosts(plan) == ["algo-2"]
