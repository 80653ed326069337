"""A toy backend: one module implementing backends.api.Backend, made choosable by one registry line
(`registry.register("toy", "backends.toy_backend:ToyBackend")`). It runs the job's entry point once, with this
Python, in a folder of its own under the jobs folder, and keeps the job's state in a JSON file there."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from smdist_launcher.backends.api import DryRun, Emit, JobHandle, JobState, JobStatus, Submission, validated_options
from smdist_launcher.errors import JobFailedError


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    greeting: str = "hello"


class ToyJob:
    def __init__(self, handle: JobHandle, model_data: str | None) -> None:
        self.handle, self.job_name, self.model_data = handle, handle.job_name, model_data


class ToyBackend:
    name: ClassVar[str] = "toy"
    description: ClassVar[str] = "runs the entry point once, here"
    Options: ClassVar[type[BaseModel]] = ToyOptions
    runs: ClassVar[frozenset[str]] = frozenset({"local"})

    def dryrun(self, submission: Submission, options: BaseModel | dict[str, Any] | None = None) -> DryRun:
        opts = validated_options(ToyOptions, options, "toy")
        argv = ["python", submission.plan.entry_point, *submission.plan.hosts[0].argv[2:]]
        return DryRun(backend=self.name, submission=submission, options=opts, what="the one command",
                      content={"greeting": opts.greeting, "run": argv})

    def submit(self, dryrun: DryRun, *, wait: bool = True, logs: Any = True,
               jobs_root: str | Path | None = None) -> ToyJob:
        submission = dryrun.submission
        folder = Path(jobs_root or ".smdist/jobs") / submission.job_name
        code = folder / "code"
        shutil.copytree(submission.code.source, code)
        model = folder / "model"
        model.mkdir()
        argv = [sys.executable, *dryrun.content["run"][1:]]
        done = subprocess.run(argv, cwd=code, capture_output=True, text=True,
                              env={**os.environ, "SM_MODEL_DIR": str(model), "TOY_GREETING": dryrun.options.greeting})
        (folder / "output.log").write_text(done.stdout + done.stderr)
        state = JobState.COMPLETED if done.returncode == 0 else JobState.FAILED
        (folder / "state.json").write_text(json.dumps({"state": state.value, "exit_code": done.returncode}))
        handle = JobHandle(backend=self.name, job_name=submission.job_name, job_dir=str(folder))
        if wait and state is not JobState.COMPLETED:
            raise JobFailedError(submission.job_name, state.value, done.stderr[-500:], str(folder))
        return ToyJob(handle, model.as_uri())

    def describe(self, handle: JobHandle) -> JobStatus:
        data = json.loads(Path(handle.job_dir or "", "state.json").read_text())
        return JobStatus(job_name=handle.job_name, backend=self.name, state=JobState(data["state"]),
                         reason=None if data["exit_code"] == 0 else f"exit code {data['exit_code']}")

    def stop(self, handle: JobHandle) -> str:
        return f"{handle.job_name} is not running"

    def logs(self, handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False,
             emit: Emit | None = None) -> None:
        (emit or sys.stdout.write)(Path(handle.job_dir or "", "output.log").read_text())
