"""The netns backend: the local backend with each host in its own network namespace (job.py's placement)."""
from __future__ import annotations

from typing import Any, ClassVar

from ..local.backend import LocalBackend
from ..local.placement import Placement


class NetnsBackend(LocalBackend):
    name: ClassVar[str] = "netns"
    description: ClassVar[str] = ("each simulated host in its own network namespace, "
                                  "real sshd and mpirun over ssh (root)")

    def placement(self, options: Any) -> Placement:
        from .job import NetnsPlacement  # lazy: container tools the dry run does not need

        return NetnsPlacement()
