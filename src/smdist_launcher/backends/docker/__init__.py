"""The docker backend: each simulated host a container of the smdist image (docker/Dockerfile).

    from smdist_launcher.backends.docker import run_job
    job = run_job(plan, image="smdist-train:latest")   # as backends.local.run_job; needs a Docker engine

`smdist image build` makes the image (backends/docker/image.py)."""
from __future__ import annotations

from typing import Any


def run_job(plan: Any, **kwargs: Any) -> Any:
    from .job import run_job as _run_job  # lazy: the local backend and pydantic

    return _run_job(plan, **kwargs)


__all__ = ["run_job"]
