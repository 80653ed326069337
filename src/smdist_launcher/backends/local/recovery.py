"""Finish a job whose launcher died without ending it (kill -9, the OOM killer, a crash).

Such a job stays InProgress in job.json forever: nobody packs its outputs, removes its temp folder or says how it
ended. The next command that reads the jobs folder and finds the launcher gone (`smdist jobs`, `status`, `logs`,
`rm`, `prune`, a new `smdist run`) does what the launcher would have done: stops what is left of the job, packs
what the hosts left (model, output data, checkpoints), records the hosts' own failure reports, removes the temp
folder and records the final status Interrupted. A lock in the job folder lets one command do it; the others wait
for it and read the result."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from ...contract import MLPaths
from ...plan.model import LaunchPlan
from ..phases import Phase
from ..toolkit import records
from ..toolkit.attempt.kept_layout import final_trees
from ..toolkit.diagnosis import describe_failure, is_secondary, read_failures
from ..toolkit.jobdir import JobDir
from ..toolkit.outputs import deliver_job_outputs
from ..toolkit.process_sweep import job_processes, kill_job_processes
from .host_environment import scrub_host_secrets

# Backends whose jobs run without a launcher process on this machine: their backend reports how they ended.
REMOTE_BACKENDS = ("sagemaker", "slurm")
# How long what is left of the job gets to end on SIGTERM (the host runtimes write failure.json then) before SIGKILL.
GRACE_S = 5.0
LOCK_FILE = ".finalize.lock"


def finalize_if_interrupted(record: records.JobRecord, grace: float = GRACE_S) -> records.JobRecord:
    """The record, finalized as Interrupted first when its launcher is gone; never raises for a job it cannot
    finish (the record is returned as it was)."""
    if record.backend in REMOTE_BACKENDS or not record.launcher_gone() or not record.job_dir:
        return record
    job_dir = JobDir(Path(record.job_dir))
    try:
        with open(job_dir.root / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another command finishing it: wait, then read what it recorded
            current = records.JobRecord.load(job_dir.record_file)
            if current.launcher_gone():
                _finalize(current, job_dir, grace)
            return current
    except OSError:
        return record  # a folder we may not write (someone else's jobs): list it as it is


def finalize_interrupted(found: Iterable[records.JobRecord], grace: float = GRACE_S) -> list[records.JobRecord]:
    return [finalize_if_interrupted(r, grace) for r in found]


def _finalize(record: records.JobRecord, job_dir: JobDir, grace: float) -> None:
    _stop_leftovers(record, grace)
    hosts = _last_attempts_trees(record, job_dir)
    notes = []
    try:
        plan = LaunchPlan.from_dict(record.plan)
        # As at the end of any job that did not complete: the partial outputs are delivered.
        delivered = deliver_job_outputs(plan, hosts, job_dir.output_dir)  # checkpoints also when the outputs failed
        record.model_data, record.output_data = delivered.model_data, delivered.output_data
        if delivered.error is not None:
            raise delivered.error
    except Exception as exc:  # noqa: BLE001 - still record the end, with why nothing was packed
        notes.append(f"packing its outputs failed: {exc}")
    for paths in hosts.values():
        try:
            scrub_host_secrets(paths)
        except (OSError, ValueError):
            pass
    _remove_tmpdir(record)
    reason = f"interrupted: its launcher (pid {record.launcher_pid}) died before the job ended"
    failures = {h: p.failure_json_file for h, p in hosts.items()}
    # The hosts' runtimes got SIGTERM when the launcher died; a report that is not that (a rank that had failed
    # already) is what the job was doing wrong when it was cut short.
    if any(not is_secondary(f) for f in read_failures(failures)):
        cause, _ = describe_failure(failures, {h: job_dir.log_file(h) for h in hosts}, None)
        reason += f"; before that, {cause}"
    if notes:
        reason += "; " + "; ".join(notes)
    record.finish(records.INTERRUPTED, reason, now=_last_sign_of_life(job_dir, hosts, record.created))
    record.save(job_dir.record_file)


def _last_attempts_trees(record: records.JobRecord, job_dir: JobDir) -> dict[str, MLPaths]:
    """The trees of the last attempt that ran (kept_layout.py): the live ones, unless the launcher died between
    attempts (the ended attempt's trees kept under attempts/<n>/ already, the next one's not staged or still being
    staged: nothing of it ran)."""
    live = {h: MLPaths(Path(info.get("root") or job_dir.host_root(h))) for h, info in record.hosts.items()}
    ended = len(record.attempts)
    if ended and (record.phase is Phase.STAGING or not any(p.root.is_dir() for p in live.values())):
        return final_trees(job_dir, ended, live)
    return live


def _stop_leftovers(record: records.JobRecord, grace: float) -> None:
    """SIGTERM what still carries the job's marker, SIGKILL what is left after `grace`."""
    for pid in job_processes(record.job_id):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while job_processes(record.job_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_job_processes(record.job_id)
    if record.backend == "docker":
        _remove_containers(record)
    elif record.backend == "netns":
        try:
            from ..netns.network import reap_stale

            reap_stale()  # the namespaces of launchers that are gone (this one's among them)
        except OSError:
            pass


def _remove_containers(record: records.JobRecord) -> None:
    try:
        from ..docker.containers import remove_job_containers

        remove_job_containers(record.job_id, record.backend_info.get("network"))
    except Exception:  # noqa: BLE001 - no engine here any more: nothing to remove
        pass


def _remove_tmpdir(record: records.JobRecord) -> None:
    """The job's /tmp/smdist-* folder (hosts' temp files, Open MPI session dirs); only one of ours."""
    tmpdir = (record.local or {}).get("tmpdir")
    if not tmpdir:
        return
    path = Path(tmpdir)
    if path.name.startswith("smdist-") and path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def _last_sign_of_life(job_dir: JobDir, hosts: dict[str, MLPaths], record_created: float) -> float:
    """When the job last wrote a log line: closer to its real end than now."""
    times = []
    for h in hosts:
        try:
            times.append(job_dir.log_file(h).stat().st_mtime)
        except OSError:
            continue
    return max([*times, record_created]) if times else time.time()
