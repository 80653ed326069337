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
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..contract.config_files import write_json
from .host_isolation import localize_orted_argv
from .rsh_protocol import OUTPUT, read_request, send_exit, send_frame

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
# mpirun --prefix P sends `PATH=P/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=P/lib:${LD_LIBRARY_PATH:-} ; ...`
_PREFIX_FORM = {"PATH": ("/bin", "$PATH"), "LD_LIBRARY_PATH": ("/lib", "${LD_LIBRARY_PATH:-}"),
                "DYLD_LIBRARY_PATH": ("/lib", "${DYLD_LIBRARY_PATH:-}")}
_MAX_COMMAND = 64 * 1024
REQUEST_TIMEOUT_S = 30.0


def expected_orted(env: dict[str, str]) -> str | None:
    """The orted this host's own mpirun would start: the one installed beside the mpirun found on the runtime's
    PATH (mpirun starts `orted` from its own prefix). None when there is no mpirun."""
    mpirun = shutil.which("mpirun", path=env.get("PATH") or os.defpath)
    if mpirun is None:
        return None
    orted = os.path.join(os.path.dirname(os.path.realpath(mpirun)), "orted")
    return os.path.realpath(orted) if os.access(orted, os.X_OK) else None


def _refuse(command: str, why: str) -> ValueError:
    return ValueError(f"only OpenMPI's orted may be started here ({why}), refused: {command[:200]!r}")


def parse_remote_command(command: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line mpirun hands its rsh agent, without a shell: `orted ...` (arguments stay literal), optionally
    after mpirun's --prefix set-up (`PATH=<prefix>/bin:$PATH ; export PATH ; ...`) naming the prefix of this host's
    own Open MPI. The program must be exactly the orted of this host's mpirun (``expected_orted``); argv[0] comes
    back as its absolute path. No variable reaches orted from the request: the set-up is checked, not applied.
    Anything else is refused: this server starts OpenMPI's daemon and nothing more."""
    if len(command) > _MAX_COMMAND:
        raise _refuse(command, f"command longer than {_MAX_COMMAND} characters")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    tokens = list(lexer)
    orted = expected_orted(env)
    prefix = os.path.dirname(os.path.dirname(orted)) if orted else None
    i = 0
    while i < len(tokens):
        m = _ASSIGNMENT.match(tokens[i])
        if m:
            name, value = m.group(1), m.group(2)
            form = _PREFIX_FORM.get(name)
            if form is None or prefix is None or value != f"{prefix}{form[0]}:{form[1]}":
                raise _refuse(command, f"the environment may not be set: {name}=")
        elif tokens[i] == "export":
            i += 1  # export NAME (checked above)
        elif tokens[i] != ";":
            break
        i += 1
    argv = tokens[i:]
    if not argv or os.path.basename(argv[0]) != "orted" or any(t in (";", "&", "&&", "|", "||") for t in argv):
        raise _refuse(command, "not an orted command")
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH") or os.defpath)
    if orted is None or program is None or os.path.realpath(program) != orted:
        raise _refuse(command, f"{argv[0]} is not this host's orted ({orted or 'no mpirun on PATH'})")
    return [orted, *argv[1:]], dict(env)


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
        self.state_file = state_file
        write_json(state_file, {"host": host, "address": self.address, "port": self.port, "token": self.token,
                                "pid": os.getpid()}, mode=0o600)
        threading.Thread(target=self._accept_loop, name="rsh-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(0.05)  # out of file descriptors, a reset connection: keep serving
                continue
            threading.Thread(target=self._serve, args=(conn,), name="rsh-session", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # Whatever a client sends, the session ends with a refusal or orted's exit: never an exception that kills
        # this thread with a traceback (the accept loop keeps serving either way).
        with conn:
            try:
                self._session(conn)
            except Exception as e:  # noqa: BLE001 - a malformed or hostile request
                self.say(f"rsh: request refused ({type(e).__name__}: {str(e)[:200]})")
                try:
                    send_exit(conn, 255)
                except OSError:
                    pass

    def _session(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_TIMEOUT_S)  # a client that never finishes its request does not hold a thread
        try:
            req = read_request(conn)
        except (ValueError, ConnectionError, OSError) as e:
            self.say(f"rsh: bad request refused ({e})")
            return
        conn.settimeout(None)
        if not isinstance(req, dict):
            raise ValueError("the request is not a JSON object")
        command = str(req.get("command", ""))
        if not hmac.compare_digest(str(req.get("token", "")).encode("utf-8", "replace"), self.token.encode()):
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
        out_fd = proc.stdout.fileno()
        try:
            for chunk in iter(lambda: os.read(out_fd, 65536), b""):
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
        self.state_file.unlink(missing_ok=True)  # the token dies with the server: nothing of it stays in the job folder
        try:
            self._sock.close()
        except OSError:
            pass
