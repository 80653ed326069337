"""Where a local-type job runs: the backends `smdist run --backend NAME` and `fit(backend=NAME)` choose from.

Each entry is a module with `run_job(plan, *, estimator=None, wait=True, logs=True, jobs_root=None)` (the local
backend's signature), imported only when chosen. A backend that cannot run on this machine raises a ValueError
whose message says why and names the process backend."""
from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

DEFAULT = "process"
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
