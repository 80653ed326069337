"""DockerJob: local mode whose simulated hosts are containers of the smdist image, compose-style.

One container per host (`--name smdist-<job>-algo-N --hostname algo-N`, network alias algo-N) on a private
network of the job, the host's tree mounted on /opt/ml, GPUs of the host's local_gpu share, entry point
smdist-train. As with the netns backend nothing tells the runtime it is local: MPI goes through the image's sshd.
Job folders, staging, supervision (one `docker run` client per host), logs, outputs and diagnosis are the local
backend's; whatever way the job ends, its containers and network are removed (by name) afterwards."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from ...contract import MLPaths
from ..local.job import LocalJob
from ..toolkit.supervisor import HostLaunch
from .image import DEFAULT_TAG, EngineUnavailable, docker_cli, require_engine

BACKEND = "docker"
IMAGE_ENV = "SMDIST_DOCKER_IMAGE"
CONTAINER_ROOT = "/opt/ml"
LABEL = "smdist.job"
CMD_TIMEOUT_S = 120
HOST_IFACE = "eth0"
# Set for processes of THIS machine (its venv, temp folder, loopback shortcuts): meaningless inside a container.
_MACHINE_ONLY_ENV = ("PATH", "TMPDIR", "SMDIST_HOST_MAP", "SMDIST_LOCAL_HOSTS", "VIRTUAL_ENV", "PYTHONPATH", "HOME",
                     "SMDIST_BIND_ADDRESS", "LD_PRELOAD")


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([docker_cli(), *args], capture_output=True, text=True, timeout=CMD_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise OSError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
    return done


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


class DockerJob(LocalJob):
    def __init__(self, *args: Any, image: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.image = image_of(self.environ, image)
        self.network = f"smdist-{self.job_id}"
        self.containers: dict[str, str] = {}
        self.record.backend = BACKEND
        self.record.backend_info = {"image": self.image, "network": self.network, "containers": {}}
        self._save()

    def _prepare(self) -> tuple[list[HostLaunch], dict[str, MLPaths]]:
        from ..netns.localize import with_interface  # the same plan change: hosts talk over their eth0

        self.plan = with_interface(self.plan, HOST_IFACE)
        launches, hosts = super()._prepare()
        _docker("network", "create", "--label", f"{LABEL}={self.job_id}", self.network)
        docker_launches = []
        for launch in launches:
            h = launch.host
            name = f"smdist-{self.job_id}-{h}"
            self.containers[h] = name
            root = str(hosts[h].root)
            env = container_env(launch.env, self.environ, root, {*self.plan.environment, *self.plan.host(h).env})
            gpus = self.record.hosts.get(h, {}).get("gpus") or []
            argv = [docker_cli(), "run", "--rm", "--name", name, "--hostname", h, "--network", self.network,
                    "--network-alias", h, "--label", f"{LABEL}={self.job_id}", "-v", f"{root}:{CONTAINER_ROOT}",
                    "--init", "--shm-size", "1g"]
            for folder in staged_sources(hosts[h]):  # what the staged channels link to, at the same paths
                argv += ["-v", f"{folder}:{folder}:ro"]
            if gpus:
                argv += ["--gpus", f'"device={",".join(gpus)}"']
            for key in sorted(env):
                argv += ["-e", key]  # names only: values (secrets too) come from the docker CLI's environment
            argv += [self.image, "--root", CONTAINER_ROOT, "--host", h,
                     "--plan", f"{CONTAINER_ROOT}/input/config/launchplan.json", "--no-install"]
            cli_env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST",
                                                                         "DOCKER_CONFIG", "DOCKER_CONTEXT")},
                       **env}
            docker_launches.append(HostLaunch(h, argv, cli_env, launch.cwd))
            self.record.hosts.setdefault(h, {}).update(container=name)
        self.record.backend_info["containers"] = dict(self.containers)
        self._save()
        return docker_launches, hosts

    def _remove_containers(self) -> None:
        """Every container and the network of the job, by label: whatever way the job ended."""
        listed = _docker("ps", "-aq", "--filter", f"label={LABEL}={self.job_id}", check=False).stdout.split()
        if listed:
            _docker("rm", "-f", *listed, check=False)
        _docker("network", "rm", self.network, check=False)

    def _run(self) -> None:
        try:
            super()._run()
        finally:
            try:
                self._remove_containers()
            except (OSError, subprocess.TimeoutExpired, EngineUnavailable) as e:
                self.console.note(f"could not remove the job's containers ({e}); docker rm -f them by label "
                                  f"{LABEL}={self.job_id}")


def run_job(plan, *, estimator=None, wait: bool = True, logs=True, jobs_root=None, grace: float = 5.0,  # type: ignore[no-untyped-def]
            image: str | None = None):
    """Like backends.local.run_job, each simulated host a container of the smdist image."""
    from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
    from ..toolkit.staging import prepare_local_run

    require_engine()
    chosen = image_of(dict(os.environ), image)
    require_image(chosen)
    plan, code = prepare_local_run(plan, estimator)
    job_dir = JobDir.create(resolve_jobs_root(jobs_root), plan.job_name)
    job = DockerJob(plan, job_dir, logs=logs, grace=grace, code=code, image=chosen)
    if wait:
        return job.wait()
    job.start_in_background()
    return job
