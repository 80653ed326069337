"""What a netns host of a container-command job gets on top of its own network, hostname and /opt/ml: the parts of a
container that SDK v3's MPI driver writes to or relies on, each private to the host's mount namespace.

- /tmp: a tmpfs (the driver's status files /tmp/ready.algo-N and /tmp/done.algo-1 must be this host's, fresh; a
  stale or another job's done.algo-1 would end the workers at once), with the job's folder bound back in;
- /etc/environment: a copy of the machine's on the host's private /run (the master appends its whole environment,
  AWS credentials included: they stay in memory of this namespace, never on disk, in a plan or in a job folder);
- root's ~/.ssh: the job's key pair, authorized, and `StrictHostKeyChecking no` for algo-N (the driver's plain
  `ssh algo-1 touch ...`, paramiko and mpirun's ssh all use ssh's defaults), also on the private /run.

Runs in host_entry, inside the host's fresh mount namespace, before the runtime starts. Stdlib only."""
from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from ...container.host_isolation import bind_mount, detach, mount

ENVIRONMENT_FILE = "/etc/environment"
_PRIVATE = Path("/run/smdist-host")   # on host_entry's private /run tmpfs
_SSH_CONFIG = "Host algo-*\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"


def private_tmp(keep: list[str], scratch: str) -> None:
    """A fresh tmpfs on /tmp. The folders of `keep` under /tmp (the job's folder, the interpreter's) stay visible,
    bound back from the machine's /tmp; `scratch` (the host's temp folder) is made anew inside it."""
    held = _PRIVATE / "machine-tmp"
    held.mkdir(mode=0o700, parents=True, exist_ok=True)
    bind_mount("/tmp", held)
    mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777")
    for path in keep:
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and os.path.isdir(held / os.path.relpath(real, "/tmp")):
            os.makedirs(real, exist_ok=True)
            bind_mount(held / os.path.relpath(real, "/tmp"), real)
    detach(held)
    os.makedirs(scratch, exist_ok=True)


def private_environment_file() -> None:
    _PRIVATE.mkdir(mode=0o700, parents=True, exist_ok=True)
    copy = _PRIVATE / "environment"
    if os.path.isfile(ENVIRONMENT_FILE):
        shutil.copyfile(ENVIRONMENT_FILE, copy)
        copy.chmod(0o644)
        bind_mount(copy, ENVIRONMENT_FILE)


def root_ssh(job_key: Path) -> None:
    """root's ~/.ssh as the job's: its key pair (every host has the same), authorized; ssh's defaults reach algo-N."""
    home = Path(pwd.getpwuid(0).pw_dir) / ".ssh"
    # A bind mount needs a folder to cover: a machine whose root never used ssh has none (a clean CI machine), so
    # make it, empty and private, as ssh itself would; the job's files go only on the namespace's private /run.
    home.mkdir(mode=0o700, exist_ok=True)
    folder = _PRIVATE / "ssh"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in (job_key.name, f"{job_key.name}.pub"):
        shutil.copyfile(job_key.parent / name, folder / name)
    (folder / job_key.name).chmod(0o600)
    (folder / "authorized_keys").write_text((job_key.parent / f"{job_key.name}.pub").read_text())
    (folder / "authorized_keys").chmod(0o600)
    (folder / "config").write_text(_SSH_CONFIG)
    bind_mount(folder, home)


def set_up(job_key: Path, keep: list[str], scratch: str) -> None:
    private_tmp(keep, scratch)
    private_environment_file()
    root_ssh(job_key)
