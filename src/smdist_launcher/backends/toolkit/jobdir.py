"""The on-disk layout of one local job. Nothing of a job is written outside this folder
(except the outputs a user sends elsewhere through output_path / checkpoint_s3_uri).

    <jobs root>/<job name>/
        plan.json              the plan as the cloud would run it (secrets redacted)
        job.json               the job record (records.py)
        logs/<host>.log        each host's output
        hosts/<host>/opt/ml    each simulated host's /opt/ml sandbox
        staging/               s3:// channel downloads shared by the hosts
        output/                model.tar.gz, output.tar.gz (default output_path)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

JOBS_DIR_ENV = "SMDIST_JOBS_DIR"
DEFAULT_JOBS_DIR = Path(".smdist") / "jobs"
# SageMaker's training job name rule; it also keeps the name a safe single path component.
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def jobs_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where job folders live, for every command and fit(): the argument, else $SMDIST_JOBS_DIR, else the nearest
    existing .smdist/jobs in the current folder or its parents (as git finds .git: `smdist jobs` works from any
    subfolder of the project), else ./.smdist/jobs (created by the first run)."""
    chosen = explicit or os.environ.get(JOBS_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser().absolute()
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / DEFAULT_JOBS_DIR).is_dir():
            return folder / DEFAULT_JOBS_DIR
    return here / DEFAULT_JOBS_DIR


JOBS_ROOT_RULE = ("$SMDIST_JOBS_DIR, else the nearest .smdist/jobs in the current folder or its parents, "
                  "else ./.smdist/jobs; --jobs-dir overrides")


def check_job_name(name: str) -> str:
    if not _JOB_NAME.fullmatch(name):
        raise ValueError(
            f"job_name: {name!r} is not a valid job name; use 1-63 letters, digits and hyphens, "
            "starting and ending with a letter or digit (SageMaker's rule)"
        )
    return name


@dataclass(frozen=True)
class JobDir:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def plan_file(self) -> Path:
        return self.root / "plan.json"

    @property
    def record_file(self) -> Path:
        return self.root / "job.json"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    @property
    def output_dir(self) -> Path:
        return self.root / "output"

    def host_dir(self, host: str) -> Path:
        return self.root / "hosts" / host

    def host_root(self, host: str) -> Path:
        """The simulated host's /opt/ml."""
        return self.host_dir(host) / "opt" / "ml"

    def log_file(self, host: str) -> Path:
        return self.logs_dir / f"{host}.log"

    @classmethod
    def create(cls, root: Path, job_name: str) -> JobDir:
        """Make a fresh job folder; refuses to reuse one (a job's record is never overwritten)."""
        path = root / check_job_name(job_name)
        root.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
        except FileExistsError:
            raise FileExistsError(
                f"job_name: a job named {job_name!r} already exists in {root}; pick another job_name "
                f"or remove {path}"
            ) from None
        job = cls(path)
        job.logs_dir.mkdir()
        return job

    @classmethod
    def open(cls, root: Path, job_name: str) -> JobDir:
        path = root / check_job_name(job_name)
        if not (path / "job.json").is_file():
            raise FileNotFoundError(f"no job named {job_name!r} in {root}")
        return cls(path)
