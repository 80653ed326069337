"""A worker host's sshd (Debian's openssh-server), started by the runtime for the master's mpirun.

Everything lives in the host's private run dir (<root>/run/ssh/, 0700): its own host key, an sshd_config of its
own, an authorized_keys holding only the job's public key, restricted to our forced command
(container/ssh_command.py). `sshd -D -e -f <config>` runs as the runtime's child; no system file is read or written
except the privilege-separation directory sshd insists on (/run/sshd: the image creates it, the netns backend gives
each host a private /run)."""
from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..contract import MLPaths

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
FORCED_COMMAND_MODULE = "smdist_launcher.container.ssh_command"
READY_TIMEOUT_S = 120.0  # a loaded machine (CI: 2 cores) can take a while


def ssh_dir(paths: MLPaths) -> Path:
    d = paths.run_dir / "ssh"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def find_sshd() -> str:
    """sshd insists on an absolute path (it re-executes itself)."""
    for candidate in (shutil.which("sshd"), *SSHD_CANDIDATES):
        if candidate and os.path.isabs(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("multi-host MPI needs sshd on every worker host and none was found; install Debian's "
                            "openssh-server (apt-get install -y openssh-server), as the smdist image does")


def keygen(path: Path, comment: str) -> Path:
    """An ed25519 key pair at `path` (+ .pub), made once."""
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                       check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)
    os.chmod(path, 0o600)
    return path


def authorized_key_line(public_key: str, root: Path, host: str) -> str:
    """The job key may run our forced command and nothing else (no pty, no forwarding)."""
    command = shlex.join([sys.executable, "-m", FORCED_COMMAND_MODULE, "--root", str(root), "--host", host])
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    return f'command="{quoted}",restrict {public_key.strip()}\n'


def sshd_config(directory: Path, port: int, host_key: Path, authorized_keys: Path) -> str:
    return "\n".join([
        f"Port {port}",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized_keys}",
        f"PidFile {directory / 'sshd.pid'}",
        "PermitRootLogin prohibit-password",  # the runtime runs as root in images
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The job folder may sit under a world-writable /tmp: the files we write are 0600 in a 0700 dir.
        "StrictModes no",
        "PermitUserEnvironment no",
        "AllowTcpForwarding no",
        "X11Forwarding no",
        "PrintMotd no",
        "LogLevel ERROR",
        "",
    ])


class SshDaemon:
    """Start sshd for this host; check() raises once it has died; stop() ends it (the runtime's sweep too)."""

    def __init__(self, paths: MLPaths, host: str, job_key: Path, port: int, env: dict[str, str]) -> None:
        self.port = port
        self.dir = ssh_dir(paths)
        if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
            raise FileNotFoundError(f"sshd (as root) needs its privilege separation directory {PRIVSEP_DIR}; "
                                    "the smdist image creates it (mkdir -p /run/sshd)")
        sshd = find_sshd()
        host_key = keygen(self.dir / "ssh_host_ed25519_key", f"smdist host key of {host}")
        public = Path(f"{job_key}.pub").read_text()
        authorized = self.dir / "authorized_keys"
        authorized.write_text(authorized_key_line(public, paths.root, host))
        os.chmod(authorized, 0o600)
        config = self.dir / "sshd_config"
        config.write_text(sshd_config(self.dir, port, host_key, authorized))
        self.log_file = self.dir / "sshd.log"
        test = subprocess.run([sshd, "-t", "-f", str(config)], capture_output=True, text=True, timeout=60)
        if test.returncode != 0:
            raise RuntimeError(f"sshd refused its configuration {config}: {test.stderr.strip()}")
        with open(self.log_file, "ab") as log:
            # The runtime's env: SMDIST_JOB_ID marks sshd for the backend's sweep.
            self.proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        self._wait_listening()

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_file.read_text(errors="replace").strip().splitlines()[-5:])
        except OSError:
            return ""

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self.check()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(
            f"sshd did not listen on port {self.port} within {READY_TIMEOUT_S:.0f} s: {self._log_tail()}")

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise RuntimeError(f"sshd on port {self.port} exited with code {code}: {self._log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
