"""The docker placement: local mode whose simulated hosts are containers of the smdist image, compose-style.

One container per host (`--name smdist-<job>-algo-N --hostname algo-N`, network alias algo-N) on a private
network of the job, the host's tree mounted on /opt/ml, GPUs of the host's local_gpu share, entry point
smdist-train. As with the netns backend nothing tells the runtime it is local: MPI goes through the image's sshd.
Job folders, staging, supervision (one `docker run` client per host), logs, outputs and diagnosis are the local
backend's; whatever way the job ends, its containers and network are removed (by name) afterwards."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from ...contract import MLPaths
from ..local.placement import HostStart, PlacementJob
from ..toolkit.supervisor import HostLaunch
from .containers import LABEL, docker as _docker, remove_job_containers
from .image import DEFAULT_TAG, EngineUnavailable, docker_cli, require_engine

BACKEND = "docker"
IMAGE_ENV = "SMDIST_DOCKER_IMAGE"
CONTAINER_ROOT = "/opt/ml"
HOST_IFACE = "eth0"
# Set for processes of THIS machine (its venv, temp folder, loopback shortcuts): meaningless inside a container.
_MACHINE_ONLY_ENV = ("PATH", "TMPDIR", "SMDIST_HOST_MAP", "SMDIST_LOCAL_HOSTS", "VIRTUAL_ENV", "PYTHONPATH", "HOME",
                     "SMDIST_BIND_ADDRESS", "LD_PRELOAD")


def image_of(environ: dict[str, str], image: str | None = None) -> str:
    return image or environ.get(IMAGE_ENV) or DEFAULT_TAG


def require_image(image: str) -> None:
    if _docker("image", "inspect", image, check=False).returncode != 0:
        raise EngineUnavailable(f"image {image!r} is not on this Docker engine; build it with `smdist image build "
                                f"--tag {image}` (or set ${IMAGE_ENV}), or use --backend process")


def container_env(env: dict[str, str], machine: dict[str, str], host_root: str,
                  job_keys: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """What the job sets for a host (its plan's environment always; otherwise what this machine's environment did
    not already have), paths inside the host's tree moved to /opt/ml."""
    out = {}
    for key, value in env.items():
        if key in _MACHINE_ONLY_ENV or (key not in job_keys and machine.get(key) == value):
            continue
        out[key] = CONTAINER_ROOT + value[len(host_root):] if value.startswith(host_root) else value
    return out


def staged_sources(paths: MLPaths) -> list[str]:
    """Folders the host's input channels link to (local staging links files, it does not copy them)."""
    found: set[str] = set()
    for top, dirs, files in os.walk(paths.input_data_dir):
        for entry in [*dirs, *files]:
            link = Path(top) / entry
            if link.is_symlink():
                target = Path(os.path.realpath(link))
                found.add(str(target if target.is_dir() else target.parent))
    # A folder inside another one that is mounted already needs no mount of its own.
    return [f for f in sorted(found) if not any(f != g and f.startswith(g.rstrip("/") + "/") for g in found)]


class DockerPlacement:
    """Each host a container of the smdist image on a private network of the job."""

    name: ClassVar[str] = BACKEND
    what: ClassVar[str] = ("each host a container of the smdist image (hostname and network alias algo-N) on a "
                           "private network of the job, its tree mounted on /opt/ml; MPI through the image's sshd")
    shortcuts: ClassVar[bool] = False
    interface: ClassVar[str | None] = HOST_IFACE

    def __init__(self, image: str | None = None) -> None:
        self.image = image_of(dict(os.environ), image)
        self.network = ""
        self.job_id = ""
        self.containers: dict[str, str] = {}

    def check(self) -> None:
        require_engine()
        require_image(self.image)

    def setup(self, job: PlacementJob) -> None:
        self.job_id = job.job_id
        self.network = f"smdist-{job.job_id}"
        self.containers = {h: f"smdist-{job.job_id}-{h}" for h in job.plan.host_names}
        job.backend_info.update(image=self.image, network=self.network, containers=dict(self.containers))
        for h, name in self.containers.items():
            job.hosts.setdefault(h, {}).update(container=name)
        _docker("network", "create", "--label", f"{LABEL}={self.job_id}", self.network)

    def launch(self, job: PlacementJob, start: HostStart) -> HostLaunch:
        h = start.host
        root = str(start.paths.root)
        env = container_env(start.env, dict(job.environ), root, {*job.plan.environment, *job.plan.host(h).env})
        gpus = job.hosts.get(h, {}).get("gpus") or []
        argv = self._run_argv(h, self.containers[h], self.network, self.job_id, root, staged_sources(start.paths),
                              gpus, sorted(env))
        argv[0] = docker_cli()  # the CLI found on PATH, as for every other docker call here
        cli_env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST",
                                                                     "DOCKER_CONFIG", "DOCKER_CONTEXT")},
                   **env}
        return HostLaunch(h, argv, cli_env, start.cwd)

    def process_root(self, host: str) -> int | None:
        """The host's container's first process as this machine sees it, for its system metrics (the supervisor
        only knows the docker client); None until the container runs."""
        name = self.containers.get(host)
        if not name:
            return None
        try:
            out = _docker("inspect", "--format", "{{.State.Pid}}", name, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired, EngineUnavailable):
            return None
        return int(out) if out.isdigit() and int(out) > 0 else None

    def kill_host(self, host: str) -> None:
        """The fault rehearsal's kill-host: SIGKILL to the whole container, as a lost machine. Killing the docker
        client (the supervisor's child) would leave the container running on, its runtime reporting itself as a
        peer's victim with exit code 1 once mpirun is gone."""
        _docker("kill", "--signal", "KILL", self.containers[host])

    def dry_start(self, host: str, argv: list[str]) -> list[str]:
        root = argv[argv.index("--root") + 1]
        return self._run_argv(host, f"smdist-<job id>-{host}", "smdist-<job id>", "<job id>", root,
                              ["<each folder the staged channels link to>"], [],
                              ["<NAME of each variable the host gets>"])

    def _run_argv(self, h: str, name: str, network: str, job_id: str, root: str, sources: list[str],
                  gpus: list[str], env_names: list[str]) -> list[str]:
        argv = ["docker", "run", "--rm", "--name", name, "--hostname", h, "--network", network,
                "--network-alias", h, "--label", f"{LABEL}={job_id}", "-v", f"{root}:{CONTAINER_ROOT}",
                "--init", "--shm-size", "1g"]
        for folder in sources:  # what the staged channels link to, at the same paths
            argv += ["-v", f"{folder}:{folder}:ro"]
        if gpus:
            argv += ["--gpus", f'"device={",".join(gpus)}"']
        for key in env_names:
            argv += ["-e", key]  # names only: values (secrets too) come from the docker CLI's environment
        return [*argv, self.image, "--root", CONTAINER_ROOT, "--host", h,
                "--plan", f"{CONTAINER_ROOT}/input/config/launchplan.json", "--no-install"]

    def teardown(self, job: PlacementJob) -> None:
        """Every container and the network of the job, by label: whatever way the job ended."""
        if not self.job_id:
            return
        remove_job_containers(self.job_id, self.network)


def run_job(job: Any, *, image: str | None = None, **kwargs: Any) -> Any:
    """Like backends.local.run_job (a LocalJob), each simulated host a container of the smdist image."""
    from ..local.job import run_job as run_local

    return run_local(job, placement=DockerPlacement(image), **kwargs)
