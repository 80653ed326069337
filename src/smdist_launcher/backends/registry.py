"""The one registry of backends: name → the class implementing backends.api.Backend, imported only when chosen.

A new backend is one module implementing the protocol plus one line in BACKENDS (or `register()` at run time, for
plugins and tests). `for_job` is the one place that decides which backend runs a job (`fit`, `smdist run|submit`,
`smdist serve`, `smdist plan --dryrun`); `choose` settles one up front for a long-lived caller (`smdist serve`)."""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # pragma: no cover
    from .api import Backend

DEFAULT = "process"      # local instance types
CLOUD = "sagemaker"      # ml.* instance types, when no backend is named
AUTO = "auto"
# name -> ("module:Class", one line for --help)
BACKENDS: dict[str, tuple[str, str]] = {
    "process": ("smdist_launcher.backends.local.backend:ProcessBackend",
                "simulated hosts as processes on loopback addresses (default)"),
    "netns": ("smdist_launcher.backends.netns.backend:NetnsBackend",
              "each simulated host in its own network namespace, real sshd and mpirun over ssh (root)"),
    "docker": ("smdist_launcher.backends.docker.backend:DockerBackend",
               "each simulated host as a container of the smdist image"),
    "slurm": ("smdist_launcher.backends.slurm.backend:SlurmBackend",
              "one Slurm node per host: sbatch, follow, outputs (needs a Slurm client; the jobs folder on a path "
              "the nodes share)"),
    "sagemaker": ("smdist_launcher.backends.sagemaker.backend:SageMakerBackend",
                  "Amazon SageMaker (or anything that speaks its API): CreateTrainingJob, CloudWatch logs"),
    "kubernetes": ("smdist_launcher.backends.kubernetes.backend:KubernetesBackend",
                   "a Kubeflow TrainJob, JobSet, HyperPod PyTorchJob or Indexed Job (--flavour) on a cluster"),
}
# Older job records name the process backend "local".
ALIASES = {"local": "process"}
LOCAL_TYPES = frozenset({"local", "local_cpu", "local_gpu"})


def names() -> list[str]:
    return list(BACKENDS)


def register(name: str, target: str, description: str = "") -> None:
    """Add a backend ("module:Class") at run time: a plugin, or a toy backend in a test."""
    BACKENDS[name] = (target, description)


def unregister(name: str) -> None:
    BACKENDS.pop(name, None)


def canonical(name: str | None) -> str | None:
    return None if name is None else ALIASES.get(name, name)


def get(name: str) -> Backend:
    """The backend called `name`; ValueError naming the choices for an unknown one."""
    key = canonical(name) or DEFAULT
    if key not in BACKENDS:
        raise ValueError(f"backend: unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module, _, attr = BACKENDS[key][0].partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        raise ValueError(f"backend: {key!r} is not part of this installation ({exc}); use --backend {DEFAULT}") \
            from None
    return cast("Backend", cls())


def for_job(name: str | None, instance_types: Iterable[str]) -> Backend:
    """The backend that runs a job of these instance types: the one named, else process for local types and
    SageMaker for ml.*. A named backend that cannot run those types is a ValueError saying what would."""
    types = list(instance_types)
    kind = "local" if all(t in LOCAL_TYPES for t in types) else "ml"
    backend = get(name or (DEFAULT if kind == "local" else CLOUD))
    if kind not in backend.runs:
        shown = ", ".join(repr(t) for t in types)
        if kind == "ml":
            raise ValueError(f"backend: {backend.name!r} runs local instance types only; {shown} runs on Amazon "
                             "SageMaker or Slurm (leave backend out, use backend 'slurm', or instance_type 'local')")
        raise ValueError(f"backend: {backend.name!r} runs ml.* instance types; {shown} runs on this machine (leave "
                         "backend out, or use backend 'process', 'netns' or 'docker')")
    return backend


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
    backend = get(name)  # an unknown or absent backend: its own ValueError
    if "local" not in backend.runs:
        raise ValueError(f"backend {name} cannot run here: it does not run hosts on this machine; use --backend "
                         "process, netns, docker or auto")
    probe = probes.get(backend.name)
    why_not = probe() if probe is not None else None
    if why_not is not None:
        hint = "" if "--backend process" in why_not else "; use --backend process (or auto) instead"
        raise ValueError(f"backend {name} cannot run here: {why_not}{hint}")
    return backend.name, "asked for"
