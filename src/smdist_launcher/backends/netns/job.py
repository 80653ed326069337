"""The netns placement: local mode whose simulated hosts have a network of their own,
so the job takes the real cluster path.

Each host runs in its own network namespace (10.213.<b>.N/24 on eth0, bridged in a namespace of our own), UTS
namespace (hostname algo-N), mount namespace (its tree on /opt/ml, /etc/hosts naming every host, a private /run).
Nothing tells the runtime it is local: MPI workers start a real sshd and the master's mpirun reaches them over ssh
with a per-job key; torchrun hosts rendezvous on algo-1. Job folders, staging, supervision, logs, outputs and
diagnosis are the local backend's (a placement only changes how a host is started and what surrounds it)."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar

from ...container.multihost import SSH_KEY_ENV
from ...container.ssh_daemon import find_sshd, keygen
from ...package_info import IMPORT_ROOT
from ..local.placement import HostStart, PlacementJob
from ..toolkit.supervisor import HostLaunch
from .network import SimNetwork, namespace_path, reap_stale

BACKEND = "netns"
HOST_ENTRY_MODULE = "smdist_launcher.backends.netns.host_entry"
HOST_IFACE = "eth0"
_TOOLS = ("ip", "nsenter", "ssh", "ssh-keygen")


class NetnsUnavailable(ValueError):
    """This machine cannot run the netns backend; the message says why and names the process backend."""


def check_available() -> None:
    if not sys.platform.startswith("linux"):
        raise NetnsUnavailable("--backend netns needs Linux network namespaces; use --backend process "
                               "(simulated hosts on loopback addresses)")
    if os.geteuid() != 0:
        raise NetnsUnavailable("--backend netns needs root (it creates network namespaces and mounts); run as root, "
                               "or use --backend process (simulated hosts on loopback addresses, no sshd)")
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    try:
        find_sshd()
    except FileNotFoundError:
        missing.append("sshd")
    if missing:
        raise NetnsUnavailable(f"--backend netns needs {', '.join(missing)} (apt-get install -y iproute2 util-linux "
                               "openssh-client openssh-server); or use --backend process")


class NetnsPlacement:
    """Each host in its own network, UTS and mount namespaces, started through nsenter and host_entry."""

    name: ClassVar[str] = BACKEND
    what: ClassVar[str] = ("each host in its own network namespace (eth0 on a private bridge, hostname algo-N, its "
                           "tree on /opt/ml); a real sshd per MPI host, mpirun over ssh with a per-job key")
    shortcuts: ClassVar[bool] = False
    interface: ClassVar[str | None] = HOST_IFACE

    def __init__(self) -> None:
        self.network: SimNetwork | None = None
        self._addresses = ""
        self._key: Path | None = None

    def check(self) -> None:
        check_available()

    def setup(self, job: PlacementJob) -> None:
        reap_stale()
        self.network = SimNetwork.create(job.plan.host_names)
        self._key = self._job_key(job)
        self._addresses = json.dumps(self.network.addresses, sort_keys=True)
        for h in job.plan.host_names:
            job.hosts.setdefault(h, {}).update(address=self.network.addresses[h], namespace=self.network.hosts[h])
        job.backend_info.update(subnet=self.network.subnet, switch=self.network.switch,
                                namespaces=dict(self.network.hosts))

    def launch(self, job: PlacementJob, start: HostStart) -> HostLaunch:
        assert self.network is not None and self._key is not None
        env = dict(start.env)
        env[SSH_KEY_ENV] = str(self._key)
        scratch = Path(env.get("TMPDIR") or "/tmp") / start.host  # Open MPI's session dir and tempfiles: per host
        scratch.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(scratch)
        argv = self._wrap(start.host, str(namespace_path(self.network.hosts[start.host])), str(start.paths.root),
                          self._addresses, str(scratch), start.argv)
        if job.plan.launcher == "container_command":  # the container parts SDK v3's drivers use (container_host.py)
            extra = ["--container-command", str(self._key)]
            for folder in _kept_under_private_tmp(job.job_root):
                extra += ["--keep", folder]
            cut = argv.index("--")
            argv = [*argv[:cut], *extra, *argv[cut:]]
        return HostLaunch(start.host, argv, env, start.cwd)

    def dry_start(self, host: str, argv: list[str]) -> list[str]:
        root = argv[argv.index("--root") + 1]
        return self._wrap(host, f"<namespace of {host}>", root, "<addresses of the job's hosts>",
                          f"<job's temporary folder>/{host}", argv)

    @staticmethod
    def _wrap(host: str, namespace: str, root: str, addresses: str, scratch: str, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net={namespace}", argv[0], "-m", HOST_ENTRY_MODULE, "--host", host, "--root", root,
                "--addresses", addresses, "--scratch", scratch, "--", *argv]

    def _job_key(self, job: PlacementJob) -> Path:
        """The job's ssh key pair: every host's sshd authorizes it, only the master's mpirun uses it."""
        folder = job.job_root / "ssh"
        folder.mkdir(mode=0o700, exist_ok=True)
        return keygen(folder / "id_ed25519", f"smdist job {job.job_id}")

    def teardown(self, job: PlacementJob) -> None:
        try:
            if self.network is not None:
                network, self.network = self.network, None
                network.destroy()
        finally:
            shutil.rmtree(job.job_root / "ssh", ignore_errors=True)  # the private key outlives no job


def run_job(job: Any, **kwargs: Any) -> Any:
    """Like backends.local.run_job (a LocalJob), each simulated host in its own network namespace with a real sshd."""
    from ..local.job import run_job as run_local

    return run_local(job, placement=NetnsPlacement(), **kwargs)


def _kept_under_private_tmp(job_root: Path) -> list[str]:
    """What a container-command host must still see when its /tmp becomes private: the job's folder, the interpreter's
    environment and every import path of ours (a checkout under /tmp with an editable install, as CI's clones are)."""
    paths = [str(job_root), os.path.dirname(os.path.dirname(sys.executable)), IMPORT_ROOT, *(p for p in sys.path if p)]
    return list(dict.fromkeys(p for p in paths if os.path.isdir(p)))

