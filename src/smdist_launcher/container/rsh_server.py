"""Serves mpirun's remote daemon start-up for one host, without sshd.

The host's runtime runs this; our rsh agent on the master connects and asks it to run `orted ...`. orted then
runs as this runtime's child, with this host's environment and code dir: ranks on algo-2 see algo-2's SM_*,
and stopping algo-2's runtime stops its ranks."""
from __future__ import annotations

import hmac
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Callable

from ..contract.config_files import write_json
from .host_isolation import localize_orted_argv
from .rsh_protocol import OUTPUT, read_request, send_exit, send_frame

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))")


def parse_remote_command(command: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line mpirun hands its rsh agent, without a shell: optional `VAR=value ; export VAR ;` set-up
    (mpirun's --prefix form; `$VAR` expanded in those values only), then `orted ...` whose arguments stay literal.
    Anything else is refused: this server starts OpenMPI's daemon and nothing more."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    tokens = list(lexer)
    env = dict(env)
    i = 0
    while i < len(tokens):
        m = _ASSIGNMENT.match(tokens[i])
        if m:
            env[m.group(1)] = _VAR.sub(lambda v: env.get(v.group(1) or v.group(2), ""), m.group(2))
        elif tokens[i] == "export":
            i += 1  # export NAME: the assignment above already put it in env
        elif tokens[i] != ";":
            break
        i += 1
    argv = tokens[i:]
    if not argv or os.path.basename(argv[0]) != "orted" or any(t in (";", "&", "&&", "|", "||") for t in argv):
        raise ValueError(f"only OpenMPI's orted may be started here, refused: {command[:200]!r}")
    return argv, env


class RshServer:
    def __init__(self, host: str, address: str, env: dict[str, str], cwd: str, state_file: Path,
                 say: Callable[[str], None]) -> None:
        self.host = host
        self.env = env
        self.cwd = cwd
        self.say = say
        self.token = secrets.token_hex(16)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((address, 0))
        self._sock.listen(16)
        self.address, self.port = self._sock.getsockname()[:2]
        self._lock = threading.Lock()
        self.started = 0
        self.active = 0
        self.exit_codes: list[int] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self._closed = False
        # 0600: the token lets its holder start orted as this host.
        write_json(state_file, {"host": host, "address": self.address, "port": self.port, "token": self.token,
                                "pid": os.getpid()}, mode=0o600)
        threading.Thread(target=self._accept_loop, name="rsh-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="rsh-session", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                req = read_request(conn)
            except (ValueError, ConnectionError, OSError) as e:
                self.say(f"rsh: bad request refused ({e})")
                return
            command = str(req.get("command", ""))
            if not hmac.compare_digest(str(req.get("token", "")), self.token):
                self.say("rsh: request with a wrong token refused")
                send_exit(conn, 255)
                return
            try:
                argv, env = parse_remote_command(command, self.env)
                argv = localize_orted_argv(argv, env)  # this host's scratch, not the master's
            except ValueError as e:
                self.say(f"rsh: {e}")
                send_exit(conn, 255)
                return
            with self._lock:
                if self._closed:
                    send_exit(conn, 255)
                    return
                # No shell (sshd would use one): mca values from user options stay literal text.
                proc = subprocess.Popen(argv, env=env, cwd=self.cwd,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                self.procs.append(proc)
                self.started += 1
                self.active += 1
            threading.Thread(target=self._watch_client, args=(conn, proc), daemon=True).start()
            assert proc.stdout is not None
            try:
                for chunk in iter(lambda: os.read(proc.stdout.fileno(), 65536), b""):  # type: ignore[union-attr]
                    send_frame(conn, OUTPUT, chunk)
            except OSError:
                pass
            code = proc.wait()
            with self._lock:
                self.active -= 1
                self.exit_codes.append(code)
            try:
                send_exit(conn, code)
            except OSError:
                pass

    @staticmethod
    def _watch_client(conn: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """The agent went away (mpirun died): hang up on orted like sshd would."""
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass
