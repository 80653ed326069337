"""mpirun's `plm_rsh_agent` in local mode: `rsh_agent [ssh-style options] HOST COMMAND...`.

Finds HOST's runtime through $SMDIST_LOCAL_HOSTS ({host: root}) and <root>/run/rsh.json, asks it to run COMMAND
(OpenMPI's orted), relays orted's output and exits with its exit code, like ssh would. No sshd needed."""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TypedDict

from .addressing import HOST_MAP_ENV, parse_host_map, reverse_host_map
from .rsh_protocol import EXIT, OUTPUT, exit_code, read_frames, send_request

LOCAL_HOSTS_ENV = "SMDIST_LOCAL_HOSTS"
WAIT_ENV = "SMDIST_WORKER_WAIT_S"
DEFAULT_WAIT_S = 600.0


def _fail(message: str) -> int:
    print(f"smdist rsh agent: {message}", file=sys.stderr, flush=True)
    return 255  # what ssh returns when it cannot reach the host


def _host_root(host: str) -> tuple[str, Path] | None:
    roots = json.loads(os.environ.get(LOCAL_HOSTS_ENV) or "{}")
    name = reverse_host_map(parse_host_map(os.environ.get(HOST_MAP_ENV))).get(host, host)
    return (name, Path(roots[name])) if name in roots else None


class ServerState(TypedDict):
    """<root>/run/rsh.json, written by the host's RshServer once it serves."""

    host: str
    address: str
    port: int
    token: str
    pid: int


def _wait_for_state(path: Path, deadline: float) -> ServerState | None:
    """The host's runtime may still be starting: its rsh.json appears once it serves."""
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    while args and args[0].startswith("-"):  # ssh-style options mpirun may add; none matter here
        args.pop(0)
    if len(args) < 2:
        return _fail("usage: rsh_agent HOST COMMAND...")
    host, command = args[0], " ".join(args[1:])
    found = _host_root(host)
    if found is None:
        return _fail(f"host {host!r} is not a local host of this job (${LOCAL_HOSTS_ENV} lists "
                     f"{sorted(json.loads(os.environ.get(LOCAL_HOSTS_ENV) or '{}'))})")
    name, root = found
    return relay(name, root, command, float(os.environ.get(WAIT_ENV) or DEFAULT_WAIT_S))


def relay(name: str, root: Path, command: str, wait_s: float) -> int:
    """Ask host `name`'s runtime (found through <root>/run/rsh.json) to run `command`; relay its output to our
    stdout and return its exit code. Also the forced command of the job's sshd (container/ssh_command.py)."""
    state = _wait_for_state(root / "run" / "rsh.json", time.monotonic() + wait_s)
    if state is None:
        return _fail(f"host {name}'s runtime did not start serving within {wait_s:.0f} s ({root}/run/rsh.json)")
    try:
        sock = socket.create_connection((str(state["address"]), int(state["port"])), timeout=30)
        sock.settimeout(None)
    except OSError as e:
        return _fail(f"cannot reach host {name}'s runtime at {state['address']}:{state['port']}: {e}")
    with sock:
        send_request(sock, str(state["token"]), name, command)
        out = sys.stdout.buffer
        try:
            for kind, payload in read_frames(sock):
                if kind == OUTPUT:
                    out.write(payload)
                    out.flush()
                elif kind == EXIT:
                    return exit_code(payload) & 0xFF
        except ConnectionError:
            return _fail(f"host {name}'s runtime closed the connection (host stopped?)")
    return 255


if __name__ == "__main__":
    sys.exit(main())
