"""The Kubernetes backend behind the interface (backends/api.py): the dry run is the rendered manifests (one YAML
stream, validated against the targets' schemas); submit/describe/stop/logs go through the official `kubernetes`
client."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from ..api import DryRun, Emit, JobHandle, JobStatus, Submission, validated_options
from .options import KubernetesOptions


def manifests_yaml(objects: list[dict[str, Any]]) -> str:
    """The objects as one YAML stream (`kubectl apply -f -` takes it), in the order rendered."""
    import yaml

    return "".join("---\n" + str(yaml.safe_dump(o, sort_keys=False, allow_unicode=True, width=120))
                   for o in objects)


class KubernetesBackend:
    name: ClassVar[str] = "kubernetes"
    description: ClassVar[str] = "a Kubeflow TrainJob, JobSet, HyperPod PyTorchJob or Indexed Job on a cluster"
    Options: ClassVar[type[BaseModel]] = KubernetesOptions
    runs: ClassVar[frozenset[str]] = frozenset({"local", "ml"})

    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun:
        from .render import render_manifests
        from .validate import validate_manifests

        opts = validated_options(KubernetesOptions, options, "kubernetes")
        assert isinstance(opts, KubernetesOptions)
        objects = render_manifests(submission, opts)
        validate_manifests(objects)
        return DryRun(backend=self.name, submission=submission, options=opts,
                      what=f"the Kubernetes manifests ({opts.flavour})", content=manifests_yaml(objects),
                      syntax="yaml")

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> Any:
        from . import job
        from .render import render_manifests
        from .validate import validate_manifests

        # the same pure rendering as the dry run (its content is the YAML shown), checked again before any call
        objects = render_manifests(dryrun.submission, dryrun.options)
        validate_manifests(objects)
        submitted = job.submit(dryrun.submission, dryrun.options, objects, manifests_yaml(objects),
                               jobs_root=jobs_root)
        if wait:
            submitted.wait(logs=logs)
        return submitted

    def describe(self, handle: JobHandle) -> JobStatus:
        from .job import describe

        return describe(handle)

    def stop(self, handle: JobHandle) -> str:
        from .job import stop

        return stop(handle)

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        from .job import logs

        logs(handle, hosts=hosts, follow=follow, emit=emit)
