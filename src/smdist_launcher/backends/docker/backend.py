"""The docker backend: the local backend with each host a container of the smdist image (job.py's placement)."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ..local.backend import LocalBackend, LocalOptions
from ..local.placement import Placement


class DockerOptions(LocalOptions):
    image: str | None = Field(default=None, description="the smdist image (default: $SMDIST_DOCKER_IMAGE, else "
                                                "smdist-train:latest)")


class DockerBackend(LocalBackend):
    name: ClassVar[str] = "docker"
    description: ClassVar[str] = "each simulated host as a container of the smdist image"
    Options: ClassVar[type[BaseModel]] = DockerOptions

    def placement(self, options: Any) -> Placement:
        from .job import DockerPlacement

        return DockerPlacement(getattr(options, "image", None))
