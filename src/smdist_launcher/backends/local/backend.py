"""The local backend behind the interface (backends/api.py): one backend, one placement per name.

process, netns and docker stage, supervise, stream and collect a job the same way (job.py); their placement is the
only difference (placement.py, netns/job.py, docker/job.py). The dry run shows what each host would start."""
from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ..api import DryRun, Emit, JobHandle, JobState, JobStatus, Submission, validated_options
from ..toolkit import folder_jobs
from ..toolkit.fault_options import FaultOptions
from ..toolkit.staging import with_model_channel
from .placement import Placement, ProcessPlacement, runtime_command

JOB_FOLDER = "<jobs folder>/{job}"


class LocalOptions(FaultOptions):
    grace: float = Field(default=5.0, gt=0, le=600,
                         description="seconds a host gets to exit after SIGTERM before SIGKILL")


class ProcessOptions(LocalOptions):
    run_as: str | None = Field(default=None, description="the user every host's processes run as (root only)")


class LocalBackend:
    """Shared by the local placements; subclasses name one and say how to build it from their options."""

    name: ClassVar[str] = "process"
    description: ClassVar[str] = "simulated hosts on this machine"
    Options: ClassVar[type[BaseModel]] = LocalOptions
    runs: ClassVar[frozenset[str]] = frozenset({"local"})

    def placement(self, options: Any) -> Placement:
        raise NotImplementedError

    # ---- dry run → submit ---------------------------------------------------------------------------
    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun:
        opts = validated_options(self.Options, options, self.name)
        assert isinstance(opts, LocalOptions)
        placement = self.placement(opts)
        plan = with_model_channel(submission.plan, submission.model_channel)
        # the run policy completed once from the options: faults checked against the job's hosts and ranks
        faults = opts.faults_for(plan.host_names, plan.world_size, self.name)
        run_as = opts.run_as if isinstance(opts, ProcessOptions) else None
        submission = submission.model_copy(update={"policy": submission.policy.with_options(run_as=run_as,
                                                                                          faults=faults)})
        folder = JOB_FOLDER.format(job=plan.job_name)
        hosts = []
        for host in plan.hosts:
            root = f"{folder}/hosts/{host.name}/opt/ml"
            argv = runtime_command("python", root, host.name, f"{root}/input/config/launchplan.json")
            # one shell-quoted line each: readable, and the same text on every machine (pinnable)
            hosts.append({"name": host.name, "role": host.role,
                          "start": shlex.join(placement.dry_start(host.name, argv)), "runs": shlex.join(host.argv)})
        content = {
            "backend": self.name,
            "job_name": plan.job_name,
            "placement": placement.what,
            "job_folder": folder,
            "code": _code_summary(submission),
            "channels": {name: _shown_uri(channel.uri, submission.code.base_dir)
                         for name, channel in sorted(plan.channels.items())},
            "checkpoints": plan.checkpoint_s3_uri,
            "hosts": hosts,
        }
        return DryRun(backend=self.name, submission=submission, options=opts, content=content,
                      what=f"what the {self.name} backend would start on this machine")

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> Any:
        from .job import run_job

        opts = dryrun.options
        return run_job(dryrun.submission, wait=wait, logs=logs, jobs_root=jobs_root, grace=opts.grace,
                       placement=self.placement(opts))

    # ---- a job by its handle ------------------------------------------------------------------------
    def describe(self, handle: JobHandle) -> JobStatus:
        from .recovery import finalize_if_interrupted

        record = finalize_if_interrupted(folder_jobs.load_record(handle))  # a dead launcher's job is finished now
        return folder_jobs.status_of(record, self.name)

    def stop(self, handle: JobHandle) -> str:
        record = folder_jobs.load_record(handle)
        if record.launcher_gone() or JobState.of(record.status).is_terminal:
            return f"{record.job_name} is not running ({record.status})"
        os.kill(record.launcher_pid, signal.SIGTERM)  # the launcher stops every host, packs outputs, records Stopped
        return f"sent SIGTERM to {record.job_name}'s launcher (pid {record.launcher_pid})"

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        record = folder_jobs.load_record(handle)
        folder_jobs.follow_log_files(record, hosts, follow, emit, lambda: folder_jobs.load_record(handle))


class ProcessBackend(LocalBackend):
    name: ClassVar[str] = "process"
    description: ClassVar[str] = "simulated hosts as processes on loopback addresses (default)"
    Options: ClassVar[type[BaseModel]] = ProcessOptions

    def placement(self, options: Any) -> Placement:
        return ProcessPlacement(run_as=options.run_as if isinstance(options, ProcessOptions) else None)


def _relative(path: str | Path, base_dir: str) -> str:
    return os.path.relpath(Path(path).resolve(), Path(base_dir).resolve())


def _shown_uri(uri: str, base_dir: str) -> str:
    """A local channel relative to the job's folder (the same text on every machine, so a dry run can be pinned)."""
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return _relative(unquote(urlparse(uri).path), base_dir)
    return uri


def _code_summary(submission: Submission) -> dict[str, Any]:
    """The code to copy, paths relative to the job's folder."""
    code, plan = submission.code, submission.plan
    source = _relative(code.source, code.base_dir) if code.source is not None else plan.source_dir  # None: s3://
    return {"source": source, "entry_point": plan.entry_point,
            "dependencies": [_relative(d, code.base_dir) for d in code.dependencies]}
