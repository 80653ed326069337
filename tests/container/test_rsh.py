"""The rsh server refuses strangers and anything but orted; the agent fails like ssh (255) with a clear message."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

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
    assert not (tmp_path / "run" / "rsh.json").exists()  # the token does not outlive the server


def test_wrong_token_and_non_orted_refused(tmp_path):
    lines: list[str] = []
    server = _server(tmp_path, lines)
    assert _ask(server, "nope", "orted -mca x y") == (b"", 255)
    assert _ask(server, server.token, "touch pwned") == (b"", 255)
    assert not (tmp_path / "pwned").exists()
    assert any("wrong token" in line for line in lines) and any("only OpenMPI's orted" in line for line in lines)
    assert server.started == 0
    server.close()


def _fake_open_mpi(prefix):
    """A stand-in Open MPI install: <prefix>/bin/mpirun and the orted beside it (echoes what it got, exits 3)."""
    bin_dir = prefix / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "orted").write_text('#!/bin/sh\necho "$MARK $(pwd) $*"\nexit 3\n')
    (bin_dir / "mpirun").write_text("#!/bin/sh\nexit 1\n")
    for name in ("orted", "mpirun"):
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_orted_command_runs_with_host_env_and_cwd(tmp_path):
    # The server runs the command mpirun built, in this host's environment and code dir.
    bin_dir = _fake_open_mpi(tmp_path / "mpi")
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
    import pytest

    from smdist_launcher.container.rsh_server import parse_remote_command

    bin_dir = _fake_open_mpi(Path(tempfile.mkdtemp()) / "mpi")
    orted = str(bin_dir / "orted")
    path = {"PATH": f"{bin_dir}:/bin"}
    argv, env = parse_remote_command('orted -mca ess "env" -mca x "$(rm -rf /)"', path)
    assert argv == [orted, "-mca", "ess", "env", "-mca", "x", "$(rm -rf /)"] and env == path
    # mpirun --prefix's set-up naming this host's own install: checked, not applied
    prefix = str(bin_dir.parent)
    argv, env = parse_remote_command(f"PATH={prefix}/bin:$PATH ; export PATH ; LD_LIBRARY_PATH={prefix}/lib:"
                                     f"${{LD_LIBRARY_PATH:-}} ; export LD_LIBRARY_PATH ; {orted} -mca a b", path)
    assert argv == [orted, "-mca", "a", "b"] and env == path

    for bad in ("touch x", "orted ; touch x", "orted && touch x", "orted | sh", ""):
        with pytest.raises(ValueError, match="only OpenMPI's orted"):
            parse_remote_command(bad, path)
    evil = Path(tempfile.mkdtemp()) / "orted"
    evil.write_text("#!/bin/sh\n")
    evil.chmod(0o755)
    for bad in (f"{evil} -mca a b",                                   # any program named orted
                f"PATH={evil.parent}:$PATH ; export PATH ; orted",       # a PATH override
                "LD_PRELOAD=/tmp/x.so orted -mca a b",                   # a preload
                f"LD_PRELOAD=/tmp/x.so ; export LD_PRELOAD ; {orted}",
                "PATH=/opt/other/bin:$PATH ; export PATH ; /opt/other/bin/orted"):  # another install's prefix
        with pytest.raises(ValueError, match="only OpenMPI's orted"):
            parse_remote_command(bad, path)
    with pytest.raises(ValueError, match="no mpirun on PATH"):
        parse_remote_command("orted", {"PATH": str(evil.parent)})


def test_the_real_orted_of_this_machine_is_accepted():
    from smdist_launcher.container.rsh_server import expected_orted, parse_remote_command

    if shutil.which("mpirun") is None:
        import pytest
        pytest.skip("needs OpenMPI's mpirun")
    argv, _ = parse_remote_command("orted -mca ess env", dict(os.environ))
    assert argv[0] == expected_orted(dict(os.environ)) and os.path.basename(argv[0]) == "orted"


def test_malformed_requests_never_raise_and_the_server_keeps_serving(tmp_path):
    """Fuzz: garbage, bad JSON, non-object JSON, odd tokens, an over-long request; then a real request still works."""
    import random
    import threading

    crashed: list[BaseException] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: crashed.append(args.exc_value)
    try:
        lines: list[str] = []
        server = _server(tmp_path, lines)
        rng = random.Random(11)
        payloads = [b"\n", b"garbage\n", b"\xff\xfe\x00\n", b"{\n", b"[1, 2]\n", b"null\n", b"42\n", b'"x"\n',
                    b'{"token": 5, "command": []}\n', b'{"token": "\\u00e9\\u00e9", "command": "orted"}\n',
                    b'{"token": {"a": 1}}\n', b"x" * (2 << 20), b"",
                    json.dumps({"token": server.token, "command": 12}).encode() + b"\n",
                    json.dumps({"token": server.token, "command": "orted '"}).encode() + b"\n",
                    json.dumps({"token": server.token, "command": "orted " + "a" * 100000}).encode() + b"\n",
                    json.dumps({"token": server.token, "command": None, "host": []}).encode() + b"\n"]
        payloads += [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))) + b"\n" for _ in range(40)]
        for payload in payloads:
            with socket.create_connection((server.address, server.port)) as s:
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
                except OSError:
                    pass  # the server may hang up on an over-long request
        # still serving: a well-formed request gets its answer
        bin_dir = _fake_open_mpi(tmp_path / "mpi")
        server.env["PATH"] = f"{bin_dir}:{server.env['PATH']}"
        assert _ask(server, server.token, "orted -mca ess env")[1] == 3
        assert server.started == 1
        server.close()
    finally:
        threading.excepthook = old_hook
    assert crashed == []
