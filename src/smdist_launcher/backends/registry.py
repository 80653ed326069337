"""Where a local-type job runs: the backends `smdist run --backend NAME` and `fit(backend=NAME)` choose from.

Each entry is a module with `run_job(plan, *, estimator=None, wait=True, logs=True, jobs_root=None)` (the local
backend's signature), imported only when chosen. A backend that cannot run on this machine raises a ValueError
whose message says why and names the process backend. `choose` settles a backend once, up front (`auto` included),
for callers that run many jobs (`smdist serve`)."""
from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any

DEFAULT = "process"
AUTO = "auto"
# name -> (module, one line for --help)
BACKENDS: dict[str, tuple[str, str]] = {
    "process": ("smdist_launcher.backends.local", "simulated hosts as processes on loopback addresses (default)"),
    "netns": ("smdist_launcher.backends.netns",
              "each simulated host in its own network namespace, real sshd and mpirun over ssh (root)"),
    "docker": ("smdist_launcher.backends.docker", "each simulated host as a container of the smdist image"),
    "slurm": ("smdist_launcher.backends.slurm", "one Slurm node per host: sbatch, follow, outputs (needs a Slurm "
              "client; the jobs folder on a path the nodes share)"),
}
# Backends that run ml.* instance types too (their hosts are real machines of that type).
CLUSTER_BACKENDS = ("slurm",)


def names() -> list[str]:
    return list(BACKENDS)


def run_job_of(name: str | None) -> Callable[..., Any]:
    """The chosen backend's run_job; ValueError naming the choices for an unknown name."""
    name = name or DEFAULT
    if name not in BACKENDS:
        raise ValueError(f"backend: unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module = BACKENDS[name][0]
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"backend: {name!r} is not part of this installation; use --backend {DEFAULT}")
    return importlib.import_module(module).run_job  # type: ignore[no-any-return]


def _docker_probe() -> str | None:
    """Why the docker backend cannot run here (short), None when it can: a docker CLI, an engine that answers, and
    the smdist image ($SMDIST_DOCKER_IMAGE or the default tag) on that engine. Two `docker` calls, no pull."""
    import shutil

    from .docker.image import EngineUnavailable, engine_answers
    from .docker.job import image_of, require_image

    if shutil.which("docker") is None:
        return "no docker CLI on PATH (Debian: apt-get install -y docker.io)"
    why = engine_answers()
    if why is not None:
        return f"no Docker engine answers at {os.environ.get('DOCKER_HOST', 'the default socket')} ({why.rstrip('.')})"
    image = image_of(dict(os.environ))
    try:
        require_image(image)
    except EngineUnavailable:
        return (f"image {image!r} is not on the Docker engine (smdist image build --tag {image}, or set "
                "$SMDIST_DOCKER_IMAGE)")
    return None


def _netns_probe() -> str | None:
    from .netns.job import NetnsUnavailable, check_available

    try:
        check_available()
    except NetnsUnavailable as e:
        return str(e)
    return None


# name -> why that backend cannot run on this machine now (one line), None when it can; backends without one can
PROBES: dict[str, Callable[[], str | None]] = {"docker": _docker_probe, "netns": _netns_probe}


def choose(name: str | None, probes: Mapping[str, Callable[[], str | None]] | None = None) -> tuple[str, str]:
    """(backend, why that one) for a long-lived caller such as `smdist serve`, checked once up front. `auto` is docker
    when its probe passes, else process: never netns, so what auto picks does not hinge on running as root (netns is
    asked for by name). ValueError (one line: why, what to do) for a named backend that cannot run here."""
    probes = PROBES if probes is None else probes
    name = name or AUTO
    if name == AUTO:
        why_not = probes["docker"]()
        if why_not is None:
            return "docker", "auto: a Docker engine answers and the smdist image is on it"
        return DEFAULT, f"auto: not docker, {why_not}"
    run_job_of(name)  # an unknown or absent backend: its own ValueError
    probe = probes.get(name)
    why_not = probe() if probe is not None else None
    if why_not is not None:
        hint = "" if "--backend process" in why_not else "; use --backend process (or auto) instead"
        raise ValueError(f"backend {name} cannot run here: {why_not}{hint}")
    return name, "asked for"
