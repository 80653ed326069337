"""Cross-host MPI on real hosts, as the SageMaker training toolkit does it, with bounded waits.

- Worker hosts start sshd (container/ssh_daemon.py) and wait until the master's mpirun is done with them; the
  master's verdict (`smdist-done CODE` over ssh) decides their exit code.
- The master waits (at most $SMDIST_SSH_WAIT_S) until every worker's sshd accepts the job key, runs mpirun with
  `plm_rsh_agent = ssh -F <our client config>`, then tells every worker how it ended.

The job key: $SMDIST_SSH_KEY (a private key; its `.pub` beside it), else the one the smdist image bakes in at
/etc/smdist/ssh/id_ed25519 (one image on every host: the same key everywhere, as SageMaker's images do).
Local mode (one machine, $SMDIST_LOCAL_HOSTS) keeps its sshd-free shortcut (rsh_agent/rsh_server)."""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contract import MLPaths
from .ssh_command import DONE, PING, done_file
from .ssh_daemon import ssh_dir

SSH_KEY_ENV = "SMDIST_SSH_KEY"
DEFAULT_SSH_KEY = "/etc/smdist/ssh/id_ed25519"
SSH_PORT_ENV = "SMDIST_SSH_PORT"
DEFAULT_SSH_PORT = 20022  # not 22: a machine's own sshd may hold it; not 2222/2223: TensorFlow's PS ports
SSH_WAIT_ENV = "SMDIST_SSH_WAIT_S"
DEFAULT_SSH_WAIT_S = 600.0
MASTER_DONE_WAIT_S = 60.0  # a worker whose orted ended waits this long for the master's verdict
PROBE_EVERY_S = 0.5


class HostUnreachable(RuntimeError):
    """A worker's sshd never answered: the failure belongs to that host."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(message)
        self.host = host


def job_key(environ: dict[str, str]) -> Path:
    key = Path(environ.get(SSH_KEY_ENV) or DEFAULT_SSH_KEY)
    if not key.is_file() or not Path(f"{key}.pub").is_file():
        raise FileNotFoundError(
            f"multi-host MPI needs the job's ssh key pair on every host: {key} (and {key}.pub) not found; set "
            f"${SSH_KEY_ENV} to a private key whose .pub lies beside it "
            f"(the smdist image has one at {DEFAULT_SSH_KEY})")
    return key


def ssh_port(environ: dict[str, str]) -> int:
    value = environ.get(SSH_PORT_ENV) or str(DEFAULT_SSH_PORT)
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ValueError(f"${SSH_PORT_ENV}: {value!r} is not a TCP port; use 1..65535 (default {DEFAULT_SSH_PORT})")
    return int(value)


def worker_hosts(plan: dict[str, Any]) -> list[str]:
    return [h["name"] for h in plan["hosts"] if h.get("role") == "mpi_worker"]


def master_verdict(paths: MLPaths) -> str | None:
    """What the master said about the job: "succeeded", "failed", or None (nothing yet)."""
    try:
        code = int(json.loads(done_file(paths).read_text())["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return "succeeded" if code == 0 else "failed"


def client_config(key: Path, port: int) -> str:
    user = pwd.getpwuid(os.geteuid()).pw_name
    return "\n".join([
        "Host *",
        f"  User {user}",
        f"  Port {port}",
        f"  IdentityFile {key}",
        "  IdentitiesOnly yes",
        # Host keys are made per job on each host: nothing to pin them to (SageMaker's images do the same).
        "  StrictHostKeyChecking no",
        "  UserKnownHostsFile /dev/null",
        "  GlobalKnownHostsFile /dev/null",
        "  BatchMode yes",
        "  LogLevel ERROR",
        "  ConnectTimeout 10",
        # A worker that vanishes (host down) ends its ssh within ~30 s; mpirun then aborts the job.
        "  ServerAliveInterval 5",
        "  ServerAliveCountMax 6",
        "",
    ])


class MasterSsh:
    """The master's side: client config, readiness probes, mpirun's agent, the final verdicts."""

    def __init__(self, paths: MLPaths, environ: dict[str, str], workers: list[str], say: Callable[[str], None]) -> None:
        self.workers = workers
        self.say = say
        self.wait_s = float(environ.get(SSH_WAIT_ENV) or DEFAULT_SSH_WAIT_S)
        self.config = ssh_dir(paths) / "ssh_config"
        if any(c.isspace() for c in str(self.config)):
            # OpenMPI splits plm_rsh_agent at white space.
            raise ValueError(f"the host's run dir {self.config.parent} contains white space; mpirun's ssh agent "
                             "cannot name a config file there (use a job folder without spaces)")
        self.config.write_text(client_config(job_key(environ), ssh_port(environ)))
        os.chmod(self.config, 0o600)
        self.notified = False

    @property
    def agent(self) -> str:
        return f"ssh -F {self.config}"

    def _ssh(self, host: str, *command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", "-F", str(self.config), host, "--", *command], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)

    def _probe(self, host: str, deadline: float, errors: dict[str, str]) -> None:
        while True:
            try:
                done = self._ssh(host, PING, timeout=20)
                if done.returncode == 0 and done.stdout.strip() == "ok":
                    errors.pop(host, None)
                    return
                errors[host] = (done.stderr.strip() or done.stdout.strip() or f"ssh exited {done.returncode}")
            except subprocess.TimeoutExpired:
                errors[host] = "ssh timed out"
            if time.monotonic() > deadline:
                return
            time.sleep(PROBE_EVERY_S)

    def wait_for_workers(self) -> None:
        """Block until every worker's sshd accepts the job key; HostUnreachable names the first that never did."""
        self.say(f"MPI master: waiting for sshd on {', '.join(self.workers)} (up to {self.wait_s:.0f} s)")
        deadline = time.monotonic() + self.wait_s
        errors: dict[str, str] = {h: "not probed yet" for h in self.workers}
        threads = [threading.Thread(target=self._probe, args=(h, deadline, errors), daemon=True) for h in self.workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for host in self.workers:
            if host in errors:
                raise HostUnreachable(host, f"worker {host}: its sshd did not accept the job key within "
                                            f"{self.wait_s:.0f} s (${SSH_WAIT_ENV}): {errors[host]}")
        self.say("MPI master: every worker's sshd answers")

    def notify_done(self, code: int, attempts: int = 3) -> None:
        """Tell every worker how mpirun ended (they exit with it); best effort, bounded."""
        if self.notified:
            return
        self.notified = True

        def tell(host: str) -> None:
            for attempt in range(attempts):
                try:
                    if self._ssh(host, DONE, str(code), timeout=60).returncode == 0:
                        return
                except subprocess.TimeoutExpired:
                    pass
                if attempt + 1 < attempts:
                    time.sleep(0.5)
            self.say(f"could not tell {host} that the job ended (it gives up after its own wait)")

        threads = [threading.Thread(target=tell, args=(h,), daemon=True) for h in self.workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=200)
