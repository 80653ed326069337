"""Where the local backend puts each simulated host: the one thing process, netns and docker jobs do differently.

The local job (job.py) stages, supervises, streams, collects and diagnoses the same way for all of them; a placement
only says what surrounds a host (a loopback address, a network namespace, a container) and how its runtime is
started. Process hosts use the one-machine shortcuts (host names mapped to loopback addresses, MPI without sshd);
hosts with a network of their own take the real cluster path, so those shortcuts are never added for them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ...contract import MLPaths
from ...plan.model import LaunchPlan
from ..toolkit.supervisor import HostLaunch
from .hand_over import hand_over

RUNTIME_MODULE = "smdist_launcher.container"


def runtime_command(python: str, root: str, host: str, plan_file: str) -> list[str]:
    """How every placement starts a host's runtime (smdist-train) once the host's tree is staged."""
    return [python, "-m", RUNTIME_MODULE, "--root", root, "--host", host, "--plan", plan_file, "--no-install"]


@dataclass(frozen=True)
class HostStart:
    """One host, staged and ready: what a placement turns into the process the supervisor starts."""

    host: str
    paths: MLPaths
    env: dict[str, str]
    cwd: Path
    argv: list[str]   # the runtime's command on this machine (runtime_command)


@dataclass
class PlacementJob:
    """All a placement sees of the job (never the job itself): what to start, for which job, and the record's facts
    it adds to (each host's address, namespace or container; what the backend needs to find the job again)."""

    job_id: str
    job_root: Path
    plan: LaunchPlan
    environ: Mapping[str, str]
    tmp_root: Path | None                   # the job's short temporary folder (hosts' TMPDIR); None before staging
    hosts: dict[str, dict[str, Any]]        # the record's facts of each host, changed in place
    backend_info: dict[str, Any]            # the record's backend facts, changed in place


class Placement(Protocol):
    name: ClassVar[str]
    what: ClassVar[str]                   # one line for dry runs
    shortcuts: ClassVar[bool]             # one-machine shortcuts: loopback addresses, MPI without sshd
    interface: ClassVar[str | None]       # the hosts' network interface when not the plan's (`lo`)

    def check(self) -> None:
        """ValueError (why, what to use instead) when this machine cannot place hosts this way."""

    def setup(self, job: PlacementJob) -> None:
        """Before any host starts, after staging (a network, keys)."""

    def launch(self, job: PlacementJob, start: HostStart) -> HostLaunch:
        """What to start for one host (the supervisor starts and reaps it)."""
        ...

    def dry_start(self, host: str, argv: list[str]) -> list[str]:
        """What launch() would start for `host`, with placeholders for what only the run knows."""
        ...

    def teardown(self, job: PlacementJob) -> None:
        """Whatever way the attempt or the job ended: nothing of the placement is left."""


class ProcessPlacement:
    """Each host a process tree of this machine on its own loopback address (127.x.y.z)."""

    name: ClassVar[str] = "process"
    what: ClassVar[str] = ("each host a process of this machine on its own loopback address; binds confined to it "
                           "by a preloaded library; MPI without sshd")
    shortcuts: ClassVar[bool] = True
    interface: ClassVar[str | None] = None

    def __init__(self, run_as: str | None = None) -> None:
        self.run_as = run_as  # the user the hosts' processes run as (serve --run-as); None: this process's user

    def check(self) -> None:
        return None

    def setup(self, job: PlacementJob) -> None:
        return None

    def launch(self, job: PlacementJob, start: HostStart) -> HostLaunch:
        if self.run_as:
            assert job.tmp_root is not None  # launch comes after staging
            hand_over(start.env, start.cwd, job.tmp_root, self.run_as)
        return HostLaunch(start.host, start.argv, start.env, start.cwd, user=self.run_as)

    def dry_start(self, host: str, argv: list[str]) -> list[str]:
        return argv

    def teardown(self, job: PlacementJob) -> None:
        return None

    def info(self) -> dict[str, Any]:
        return {"run_as": self.run_as} if self.run_as else {}

