"""Slurm's attempt loop, inside the allocation: after each srun step the batch script's closing call
(finish.py) asks the restart policy what to do with the attempt that ended, and runs the next one as a new job
step on the same nodes, so the sbatch script (pinned in CI) stays the same whether or not a job retries.

The loop, its records and the kept layout are the shared attempt module's (toolkit/attempt/), as on the local
backends: between attempts every process of the step is gone (srun ends them), the checkpoints are synced to
checkpoint_s3_uri, each host's whole tree moves to attempts/<n>/<host>/ and the next attempt's trees are staged from
scratch (checkpoints restored), it starts with SMDIST_ATTEMPT set, and each host's log gets a `---- attempt N ----`
line."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ...container.hang_detector import HangDetector, resume_warning
from ...contract import MLPaths
from ...plan.model import LaunchPlan
from ..local.host_environment import scrub_host_secrets
from ..phases import Phase
from ..toolkit import records
from ..toolkit.attempt.book import AttemptBook
from ..toolkit.attempt.host_staging import stage_hosts
from ..toolkit.attempt.kept_layout import attempt_dir, keep_hosts
from ..toolkit.attempt.loop import AttemptEnd, LoopEnd, run_attempts
from ..toolkit.diagnosis import describe_failure, failure_cause
from ..toolkit.jobdir import JobDir
from ..toolkit.log_mux import split_prefix
from ..toolkit.outputs import save_checkpoints
from ..toolkit.resilience_plan import ATTEMPT_ENV, ResiliencePlan
from ..toolkit.restart_policy import Cause, Decision
from ..toolkit.staging import LocalCode
from ..toolkit.supervisor import HostExit
from .node_faults import FAULTS_FILE, fired_markers
from .script import NODE_MODULE, srun_argv

RESILIENCE_FILE = "slurm/resilience.json"
CODE_FILE = "slurm/code.json"   # the code each attempt stages (save_code)
EXITS_DIR = "slurm/exits"   # each node's runtime exit (node.py): who went first, and how


def save_resilience(job: JobDir, resilience: ResiliencePlan) -> None:
    (job.root / RESILIENCE_FILE).write_text(resilience.to_json())


def _resilience(job: JobDir) -> ResiliencePlan:
    path = job.root / RESILIENCE_FILE
    return ResiliencePlan.from_json(path.read_text()) if path.is_file() else ResiliencePlan()


def first_exit(job: JobDir) -> HostExit | None:
    """The first node whose runtime ended non-zero in this attempt."""
    exits = []
    for path in sorted((job.root / EXITS_DIR).glob("*.json")):
        try:
            raw = json.loads(path.read_text())
            exits.append(HostExit(str(raw["host"]), int(raw["code"]), float(raw["time"])))
        except (OSError, ValueError, KeyError):
            continue
    failed = [e for e in exits if e.code != 0]
    return min(failed, key=lambda e: e.wall_time) if failed else None


def log_failure(job: JobDir) -> str | None:
    """The first failure of a node's log consumer in this attempt (node.py): the job fails with it, never retried."""
    for path in sorted((job.root / EXITS_DIR).glob("*.json")):
        try:
            found = json.loads(path.read_text()).get("log_failure")
        except (OSError, ValueError, AttributeError):
            continue
        if found:
            return f"the job's logs failed on {path.stem}: {found}"
    return None


def _preempted(job: JobDir, before: set[str]) -> bool:
    """A `preempt` fault fired during this attempt (rehearsal of a spot interruption)."""
    path = job.root / FAULTS_FILE
    raw = json.loads(path.read_text()) if path.is_file() else []
    preempts = {str(i) for i, f in enumerate(raw) if str(f).startswith("preempt@")}
    return any(m.split("-", 1)[0] in preempts for m in fired_markers(job) - before)


def _first_steps(resilience: ResiliencePlan, logs: dict[str, Path], offsets: dict[str, int]) -> dict[str, int]:
    """Where each stepped monitor's first line of this attempt was (read back from the hosts' logs)."""
    if not resilience.monitors:
        return {}
    detector = HangDetector(resilience.monitors, [])
    for host, path in logs.items():
        try:
            with open(path, "rb") as f:
                f.seek(offsets.get(host, 0))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            _, rank, body = split_prefix(line)
            if rank is not None:
                detector.line(rank, body, 0.0)
    return detector.first_steps()


def save_code(job: JobDir, code: LocalCode) -> None:
    """What a later attempt stages again into its fresh host trees (the loop runs in the allocation, from the job
    folder only)."""
    (job.root / CODE_FILE).write_text(json.dumps({
        "source": str(code.source) if code.source is not None else None,
        "dependencies": [str(d) for d in code.dependencies]}))


def _code(job: JobDir) -> LocalCode:
    path = job.root / CODE_FILE
    if not path.is_file():
        return LocalCode(None)
    raw = json.loads(path.read_text())
    return LocalCode(Path(raw["source"]) if raw.get("source") else None,
                     tuple(Path(d) for d in raw.get("dependencies") or []))


class SlurmAttempts:
    """The steps of the shared attempt loop (toolkit/attempt/loop.py) inside one allocation (finish.py runs it): the
    first attempt is the batch script's srun step, each later one a new step on fresh host trees."""

    def __init__(self, job: JobDir) -> None:
        self.job = job
        self.plan = LaunchPlan.from_json(job.plan_file.read_text())
        self.resilience = _resilience(job)
        self.hosts = {h: MLPaths(job.host_root(h)) for h in self.plan.host_names}
        self.logs = {h: job.log_file(h) for h in self.plan.host_names}
        self.offsets = {h: 0 for h in self.plan.host_names}
        self.fired: set[str] = set()
        self.restored = 0
        self.code = 0
        # numbered in memory: a launcher refreshing job.json meanwhile cannot make an attempt lost or repeated
        self.book = AttemptBook(self._save_attempts)

    def _save_attempts(self, entries: list[dict[str, Any]]) -> None:
        def change(record: records.JobRecord) -> None:
            record.attempts = entries

        records.update_record(self.job.record_file, change)

    def run(self, code: int) -> tuple[int, LoopEnd]:
        """The exit code of the last attempt that ran and how the loop ended."""
        self.code = code
        end = run_attempts(self, self.resilience, self.book)
        return self.code, end

    def run_attempt(self, number: int) -> AttemptEnd:
        if number > 1:
            staged = stage_hosts(self.job, self.plan, _code(self.job))
            self.hosts, self.restored = staged.hosts, staged.restored
            for host, log in self.logs.items():
                with open(log, "ab") as f:
                    f.write(f"[{host}] [smdist] ---- attempt {number} ----\n".encode())
                self.offsets[host] = log.stat().st_size
            self.code = self._srun(number)
        self.book.mark(Phase.RUNNING)
        return self._ended(self.code, number)

    def _ended(self, code: int, number: int) -> AttemptEnd:
        failures = {h: p.failure_json_file for h, p in self.hosts.items()}
        reason: str | None = None
        logs_failed = log_failure(self.job)
        if logs_failed is not None:  # whatever else happened: the job's logs are not whole
            cause, reason = Cause.LAUNCHER_ERROR, logs_failed
        elif code == 0:  # every node exited 0: a preempt noticed late changes nothing
            cause = Cause.COMPLETED
        elif _preempted(self.job, self.fired):
            cause, reason = Cause.PREEMPTED, "preempted: every host got SIGTERM, as on a spot interruption"
        else:
            first_exit_ = first_exit(self.job)
            cause = failure_cause(failures, first_exit_, log_files=self.logs)
            reason = describe_failure(failures, self.logs, first_exit_)[0]
        facts: dict[str, Any] = {"restored_checkpoints": self.restored,
                                 "first_steps": _first_steps(self.resilience, self.logs, self.offsets)}
        warning = None
        for step in facts["first_steps"].values():
            warning = warning or resume_warning(number, step, self.restored)
        if warning:
            facts["warning"] = warning
        self.fired = fired_markers(self.job)
        return AttemptEnd(cause, reason, facts)

    def between_attempts(self, number: int, decision: Decision) -> None:
        """Checkpoints synced out, every host's tree kept under attempts/<number>/ (kept_layout.py) with the nodes'
        exit notes; the next attempt stages fresh trees."""
        save_checkpoints(self.plan, self.hosts)
        for paths in self.hosts.values():  # a runtime killed before it could take its secrets out
            scrub_host_secrets(paths)
        self.hosts = keep_hosts(self.job, number, self.plan.host_names)
        exits = self.job.root / EXITS_DIR
        if exits.exists():
            shutil.move(str(exits), str(attempt_dir(self.job, number) / "exits"))
        for host, log in self.logs.items():
            with open(log, "ab") as f:
                f.write(f"[{host}] [smdist] retrying ({decision.why})\n".encode())

    def _srun(self, number: int) -> int:
        python = os.environ.get("SMDIST_PYTHON") or "python3"
        argv = [*srun_argv(self.plan), python, "-m", NODE_MODULE, str(self.job.root)]
        env = {**os.environ, ATTEMPT_ENV: str(number)}  # srun exports it to every node (node.py)
        return subprocess.run(argv, stdin=subprocess.DEVNULL, check=False, env=env).returncode
