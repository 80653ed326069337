"""Slurm's attempt loop, inside the allocation: after each srun step the batch script's closing call
(finish.py) asks the restart policy what to do with the attempt that ended, and runs the next one as a new job
step on the same nodes, so the sbatch script (pinned in CI) stays the same whether or not a job retries.

Between attempts, as on the local backends: every process of the step is gone (srun ends them), each host's outputs
and failure records move to attempts/<n>/<host>/, its checkpoints are synced to checkpoint_s3_uri and restored, the
next attempt starts with SMDIST_ATTEMPT set, and each host's log gets a `---- attempt N ----` line."""
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
from ..toolkit import records
from ..toolkit.diagnosis import describe_failure, failure_cause
from ..toolkit.jobdir import JobDir
from ..toolkit.log_mux import split_prefix
from ..toolkit.outputs import restore_checkpoints, save_checkpoints
from ..toolkit.resilience_plan import ResiliencePlan
from ..toolkit.restart_policy import Attempt, Cause, Decision, decide
from ..toolkit.supervisor import HostExit
from .node_faults import FAULTS_FILE, fired_markers
from .script import NODE_MODULE, srun_argv

RESILIENCE_FILE = "slurm/resilience.json"
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


class SlurmAttempts:
    """The loop's state across the attempts of one allocation (finish.py runs it in one process)."""

    def __init__(self, job: JobDir) -> None:
        self.job = job
        self.plan = LaunchPlan.from_json(job.plan_file.read_text())
        self.resilience = _resilience(job)
        self.hosts = {h: MLPaths(job.host_root(h)) for h in self.plan.host_names}
        self.logs = {h: job.log_file(h) for h in self.plan.host_names}
        self.offsets = {h: 0 for h in self.plan.host_names}
        self.fired: set[str] = set()
        self.restored = 0

    def run(self, code: int) -> tuple[int, str | None]:
        """The exit code of the last attempt and, when it failed, its reason."""
        while True:
            decision, reason = self._decide(code)
            if decision.action == "finish":
                return code, reason
            self._between(decision)
            code = self._srun()

    def _decide(self, code: int) -> tuple[Decision, str | None]:
        record = records.JobRecord.load(self.job.record_file)
        number = len(record.attempts) + 1
        failures = {h: p.failure_json_file for h, p in self.hosts.items()}
        reason: str | None = None
        if code == 0:
            cause = Cause.COMPLETED
        elif _preempted(self.job, self.fired):
            cause, reason = Cause.PREEMPTED, "preempted: every host got SIGTERM, as on a spot interruption"
        else:
            first_exit_ = first_exit(self.job)
            cause = failure_cause(failures, first_exit_)
            reason = describe_failure(failures, self.logs, first_exit_)[0]
        r = self.resilience
        decision = decide(Attempt(number, cause, reason), max_attempts=r.max_attempts, retry_on=r.retry_on,
                          use_spot_instances=r.use_spot)
        entry: dict[str, Any] = {"attempt": number, "cause": cause.value, "reason": reason, "decision": decision.action,
                                 "why": decision.why, "restored_checkpoints": self.restored,
                                 "first_steps": _first_steps(r, self.logs, self.offsets)}
        warning = None
        for step in entry["first_steps"].values():
            warning = warning or resume_warning(number, step, self.restored)
        if warning:
            entry["warning"] = warning
        record.attempts.append(entry)
        record.save(self.job.record_file)
        self.fired = fired_markers(self.job)
        return decision, reason

    def _between(self, decision: Decision) -> None:
        record = records.JobRecord.load(self.job.record_file)
        number = len(record.attempts)
        kept = self.job.root / "attempts" / str(number)
        save_checkpoints(self.plan, self.hosts)
        for host, paths in self.hosts.items():  # the next attempt's hosts start without this one's results
            for folder, name in ((paths.output_dir, "output"), (paths.model_dir, "model")):
                if folder.exists():
                    (kept / host).mkdir(parents=True, exist_ok=True)
                    shutil.move(str(folder), str(kept / host / name))
                    folder.mkdir(parents=True)
        exits = self.job.root / EXITS_DIR
        if exits.exists():
            shutil.move(str(exits), str(kept / "exits"))
        self.restored = restore_checkpoints(self.plan, self.hosts)
        for host, log in self.logs.items():
            with open(log, "ab") as f:
                f.write(f"[{host}] [smdist] retrying ({decision.why})\n"
                        f"[{host}] [smdist] ---- attempt {number + 1} ----\n".encode())
            self.offsets[host] = log.stat().st_size

    def _srun(self) -> int:
        python = os.environ.get("SMDIST_PYTHON") or "python3"
        argv = [*srun_argv(self.plan), python, "-m", NODE_MODULE, str(self.job.root)]
        return subprocess.run(argv, stdin=subprocess.DEVNULL, check=False).returncode
