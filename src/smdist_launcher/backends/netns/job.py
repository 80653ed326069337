"""NetnsJob: local mode whose simulated hosts have a network of their own, so the job takes the real cluster path.

Each host runs in its own network namespace (10.213.<b>.N/24 on eth0, bridged in a namespace of our own), UTS
namespace (hostname algo-N), mount namespace (its tree on /opt/ml, /etc/hosts naming every host, a private /run).
Nothing tells the runtime it is local: MPI workers start a real sshd and the master's mpirun reaches them over ssh
with a per-job key; torchrun hosts rendezvous on algo-1. Job folders, staging, supervision, logs, outputs and
diagnosis are the local backend's (this class only changes how a host is started and what surrounds it)."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ...container.multihost import SSH_KEY_ENV
from ...container.ssh_daemon import find_sshd, keygen
from ...contract import MLPaths
from ..local.job import LocalJob
from ..toolkit.supervisor import HostLaunch
from .localize import with_interface
from .network import SimNetwork, namespace_path, reap_stale

BACKEND = "netns"
HOST_ENTRY_MODULE = "smdist_launcher.backends.netns.host_entry"
HOST_IFACE = "eth0"
_TOOLS = ("ip", "nsenter", "ssh", "ssh-keygen")
# Local mode's loopback shortcuts (host map, sshd-free MPI, binds confined to a loopback address by a preloaded
# library): without them the runtime takes the real multi-host path on the host's own network.
_LOOPBACK_ONLY_ENV = ("SMDIST_HOST_MAP", "SMDIST_LOCAL_HOSTS", "SMDIST_BIND_ADDRESS", "LD_PRELOAD")


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


class NetnsJob(LocalJob):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.network: SimNetwork | None = None
        self.record.backend = BACKEND
        self._save()

    def _prepare(self) -> tuple[list[HostLaunch], dict[str, MLPaths]]:
        # The hosts' copy of the plan talks over eth0 (plan.json, written already, keeps the user's).
        self.plan = with_interface(self.plan, HOST_IFACE)
        launches, hosts = super()._prepare()
        reap_stale()
        self.network = SimNetwork.create([launch.host for launch in launches])
        key = self._job_key()
        addresses = json.dumps(self.network.addresses, sort_keys=True)
        netns_launches = []
        for launch in launches:
            h = launch.host
            env = {k: v for k, v in launch.env.items() if k not in _LOOPBACK_ONLY_ENV}
            if self.environ.get("LD_PRELOAD"):  # the user's own preloads stay
                env["LD_PRELOAD"] = self.environ["LD_PRELOAD"]
            env[SSH_KEY_ENV] = str(key)
            scratch = Path(env.get("TMPDIR") or "/tmp") / h  # Open MPI's session dir and tempfiles: per host
            scratch.mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = str(scratch)
            root = str(hosts[h].root)
            argv = ["nsenter", f"--net={namespace_path(self.network.hosts[h])}", sys.executable, "-m",
                    HOST_ENTRY_MODULE, "--host", h, "--root", root, "--addresses", addresses, "--scratch",
                    str(scratch), "--", *launch.argv]
            netns_launches.append(HostLaunch(h, argv, env, launch.cwd))
            self.record.hosts.setdefault(h, {}).update(address=self.network.addresses[h],
                                                       namespace=self.network.hosts[h])
        self.record.backend_info = {"subnet": self.network.subnet, "switch": self.network.switch,
                                    "namespaces": dict(self.network.hosts)}
        self._save()
        return netns_launches, hosts

    def _job_key(self) -> Path:
        """The job's ssh key pair: every host's sshd authorizes it, only the master's mpirun uses it."""
        folder = self.dir.root / "ssh"
        folder.mkdir(mode=0o700, exist_ok=True)
        return keygen(folder / "id_ed25519", f"smdist job {self.job_id}")

    def _run(self) -> None:
        try:
            super()._run()
        finally:
            if self.network is not None:
                self.network.destroy()
            shutil.rmtree(self.dir.root / "ssh", ignore_errors=True)  # the private key outlives no job


def run_job(plan, *, estimator=None, wait: bool = True, logs=True, jobs_root=None, grace: float = 5.0):  # type: ignore[no-untyped-def]
    """Like backends.local.run_job, each simulated host in its own network namespace with a real sshd."""
    from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
    from ..toolkit.staging import prepare_local_run

    check_available()
    plan, code = prepare_local_run(plan, estimator)
    job_dir = JobDir.create(resolve_jobs_root(jobs_root), plan.job_name)
    job = NetnsJob(plan, job_dir, logs=logs, grace=grace, code=code)
    if wait:
        return job.wait()
    job.start_in_background()
    return job
