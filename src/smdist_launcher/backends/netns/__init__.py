"""The netns backend: local mode with each simulated host in its own network namespace, real sshd and mpirun over ssh.

    from smdist_launcher.backends.netns import run_job
    job = run_job(plan)       # as backends.local.run_job; needs root, iproute2, nsenter, openssh-server

Light on purpose: `host_entry` runs inside each host before the runtime and must not pull in the SDK."""
from __future__ import annotations

from typing import Any


def run_job(plan: Any, **kwargs: Any) -> Any:
    from .job import run_job as _run_job  # lazy: the local backend and pydantic

    return _run_job(plan, **kwargs)


__all__ = ["run_job"]
