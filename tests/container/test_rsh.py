"""The rsh server refuses strangers and anything but orted; the agent fails like ssh (255) with a clear message."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from smdist_launcher.container.console import Console
from smdist_launcher.container.rsh_protocol import EXIT, OUTPUT, exit_code, read_frames, send_request
from smdist_launcher.container.rsh_server import RshServer


def _server(tmp_path, lines):
    console = Console("algo-2")
    console.say = lines.append  # type: ignore[method-assign]
    env = {"PATH": os.environ["PATH"], "MARK": "algo-2-env"}
    return RshServer("algo-2", "127.0.0.1", env, str(tmp_path), tmp_path / "run" / "rsh.json", console.say)


def _ask(server, token, command):
    with socket.create_connection((server.address, server.port)) as s:
        send_request(s, token, "algo-2", command)
        out, code = b"", None
        for kind, payload in read_frames(s):
            if kind == OUTPUT:
                out += payload
            elif kind == EXIT:
                code = exit_code(payload)
        return out, code


def test_state_file_is_private(tmp_path):
    server = _server(tmp_path, [])
    state = json.loads((tmp_path / "run" / "rsh.json").read_text())
    assert state["port"] == server.port and state["token"] == server.token
    assert oct((tmp_path / "run" / "rsh.json").stat().st_mode & 0o777) == "0o600"
    server.close()


def test_wrong_token_and_non_orted_refused(tmp_path):
    lines: list[str] = []
    server = _server(tmp_path, lines)
    assert _ask(server, "nope", "orted -mca x y") == (b"", 255)
    assert _ask(server, server.token, "touch pwned") == (b"", 255)
    assert not (tmp_path / "pwned").exists()
    assert any("wrong token" in line for line in lines) and any("only OpenMPI's orted" in line for line in lines)
    assert server.started == 0
    server.close()


def test_orted_command_runs_with_host_env_and_cwd(tmp_path):
    # A stand-in `orted` on PATH: the server runs the command mpirun built, in this host's environment and code dir.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "orted").write_text('#!/bin/sh\necho "$MARK $(pwd) $*"\nexit 3\n')
    (bin_dir / "orted").chmod(0o755)
    server = _server(tmp_path, [])
    server.env["PATH"] = f"{bin_dir}:{server.env['PATH']}"
    out, code = _ask(server, server.token, 'orted -mca ess "env"')
    assert (out.decode(), code) == (f"algo-2-env {tmp_path} -mca ess env\n", 3)
    assert (server.started, server.active, server.exit_codes) == (1, 0, [3])
    server.close()


def test_agent_unknown_host_fails_like_ssh(tmp_path):
    env = {**os.environ, "SMDIST_LOCAL_HOSTS": json.dumps({"algo-1": str(tmp_path)}), "SMDIST_WORKER_WAIT_S": "1"}
    r = subprocess.run([sys.executable, "-m", "smdist_launcher.container.rsh_agent", "algo-9", "orted"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 255 and "host 'algo-9' is not a local host of this job" in r.stderr
    r = subprocess.run([sys.executable, "-m", "smdist_launcher.container.rsh_agent", "algo-1", "orted"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 255 and "did not start serving within 1 s" in r.stderr


def test_parse_remote_command_without_a_shell():
    from smdist_launcher.container.rsh_server import parse_remote_command

    argv, env = parse_remote_command('orted -mca ess "env" -mca x "$(rm -rf /)"', {"PATH": "/bin"})
    assert argv == ["orted", "-mca", "ess", "env", "-mca", "x", "$(rm -rf /)"] and env == {"PATH": "/bin"}
    argv, env = parse_remote_command("PATH=/opt/mpi/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/opt/mpi/lib:"
                                     "${LD_LIBRARY_PATH:-} ; export LD_LIBRARY_PATH ; /opt/mpi/bin/orted -mca a b",
                                     {"PATH": "/bin"})
    assert argv == ["/opt/mpi/bin/orted", "-mca", "a", "b"]
    assert env == {"PATH": "/opt/mpi/bin:/bin", "LD_LIBRARY_PATH": "/opt/mpi/lib:"}
    import pytest

    for bad in ("touch x", "orted ; touch x", "orted && touch x", "orted | sh", ""):
        with pytest.raises(ValueError, match="only OpenMPI's orted"):
            parse_remote_command(bad, {})
