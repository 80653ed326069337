"""run_slurm_job: stage a job folder on a shared path, sbatch the plan's script, follow it to the end.

The job folder has the local backend's layout (jobdir.py) plus `slurm/job.sbatch` (what was submitted) and
`slurm/batch-<id>.out` (the batch script's own output). The record says backend "slurm" and the Slurm job id,
so `smdist status/stop/logs` find the job again from any shell."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ...container.host_resilience import RESILIENCE_ENV
from ...contract.config_files import hyperparameters_for
from ...contract.secrets import SECRET_HPS_ENV, encode_secret_env, is_secret_key, secret_hyperparameters
from ...errors import JobFailedError
from ...plan.model import LaunchPlan
from ..api import JobHandle, JobState, Submission
from ..phases import Phase
from ..toolkit import records
from ..toolkit.attempt.host_staging import stage_hosts
from ..toolkit.job_console import JobConsole, console_for
from ..toolkit.job_metrics import MetricsSettings
from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
from ..toolkit.output_settings import OutputSettings
from ..toolkit.resilience_plan import resilience_of
from ..toolkit.staging import prepare_local_run, submission_of
from . import scheduler
from .attempts import save_code, save_resilience
from .finish import finalize
from .node_faults import save_faults
from .options import SlurmOptions
from .script import sbatch_script

POLL_S = 0.5


def submission_environment(plan: LaunchPlan, environ: dict[str, str], job: JobDir) -> dict[str, str]:
    """sbatch's environment (exported to every node): the caller's, the job folder, the interpreter, and the
    secret values plan.json holds redacted (they travel only this way)."""
    env = dict(environ)
    env["SMDIST_JOB_DIR"] = str(job.root)
    env["SMDIST_PYTHON"] = sys.executable
    for key, value in plan.environment.items():
        if is_secret_key(key):
            env[key] = value
    raw = hyperparameters_for(plan.model_dump(mode="json"))
    if secret_hyperparameters(raw):
        env[SECRET_HPS_ENV] = encode_secret_env(raw)
    return env


class SlurmJob:
    """A training job on a Slurm cluster: the local job's surface (status, wait, stop, describe)."""

    def __init__(self, job_dir: JobDir, *, logs: Any = True) -> None:
        self.dir = job_dir
        self.plan = LaunchPlan.from_json(job_dir.plan_file.read_text())
        self.job_name = self.plan.job_name
        self.console: JobConsole = console_for(logs, self.plan.host_names)
        self.diagnosis = ""
        self.handle = JobHandle(backend="slurm", job_name=self.job_name, job_dir=str(job_dir.root))

    # ---- SageMaker-like surface -----------------------------------------------------------------
    @property
    def job_dir(self) -> Path:
        return self.dir.root

    @property
    def record(self) -> records.JobRecord:
        return records.JobRecord.load(self.dir.record_file)

    @property
    def slurm_job_id(self) -> str:
        return str(self.record.backend_info["slurm_job_id"])

    @property
    def status(self) -> str:
        return refresh(self.dir).status

    @property
    def model_data(self) -> str | None:
        return self.record.model_data

    def describe(self) -> dict[str, Any]:
        return dict(refresh(self.dir).__dict__)

    def stop(self) -> None:
        """scancel; the record becomes Stopped once Slurm has ended the job."""
        scheduler.cancel(self.slurm_job_id)

    def wait(self, timeout: float | None = None) -> SlurmJob:
        """Follow the job (its hosts' lines on the console) until it ends; JobFailedError unless it completed.
        Ctrl-C cancels the job, as in local mode."""
        follower = _LogFollower(self.dir, self.plan.host_names, self.console)
        follower.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                record = refresh(self.dir)
                if record.status in records.FINAL_STATUSES:
                    break
                never = record.backend_info.get("never_starts")
                if never:
                    self.stop()
                    finalize(self.dir, records.FAILED, never)
                    raise scheduler.SlurmError(never)
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"job {self.job_name} still {record.status} after {timeout} s")
                self.console.status(f"{self.job_name}: {record.backend_info.get('slurm_state', record.phase)} "
                                    f"(Slurm job {self.slurm_job_id})")
                time.sleep(POLL_S)
            # The batch script writes the record just before it exits: the job is over when Slurm says so too.
            _wait_slurm_final(self.slurm_job_id, deadline=time.monotonic() + 60)
        except KeyboardInterrupt:
            self.console.note(f"Ctrl-C: cancelling Slurm job {self.slurm_job_id}")
            self.stop()
            record = _wait_final(self.dir)
        finally:
            follower.stop()
            self.console.close()
        self.diagnosis = str(record.backend_info.get("diagnosis") or record.failure_reason or "")
        if record.status != records.COMPLETED:
            raise JobFailedError(self.job_name, record.status, self.diagnosis, str(self.dir.root))
        return self


def _wait_slurm_final(slurm_job_id: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        state = scheduler.state(slurm_job_id)
        if state is None or state.final:
            return
        time.sleep(POLL_S)


def _wait_final(job: JobDir, timeout: float = 120.0) -> records.JobRecord:
    deadline = time.monotonic() + timeout
    record = refresh(job)
    while record.status not in records.FINAL_STATUSES and time.monotonic() < deadline:
        time.sleep(POLL_S)
        record = refresh(job)
    return record


def refresh(job: JobDir) -> records.JobRecord:
    """The record, brought up to date with Slurm: a job Slurm ended without its batch script finishing
    (scancel, time limit, node failure) is finalised here."""
    record = records.JobRecord.load(job.record_file)
    if record.status in records.FINAL_STATUSES or "slurm_job_id" not in record.backend_info:
        return record
    state = scheduler.state(str(record.backend_info["slurm_job_id"]))
    if state is None or not state.final:
        never = scheduler.hopeless(state) if state is not None else None
        if state is not None and (record.backend_info.get("slurm_state") != state.state or never):
            def note_state(current: records.JobRecord) -> None:
                if current.status in records.FINAL_STATUSES:
                    return  # the batch script finalised it meanwhile
                current.backend_info = {**current.backend_info, "slurm_state": state.state,
                                        "slurm_reason": state.reason, **({"never_starts": never} if never else {})}
                if state.state == "RUNNING" and current.phase != Phase.RUNNING:
                    current.enter_phase(Phase.RUNNING)

            # under the record's lock: the attempt loop in the allocation writes the same file
            record = records.update_record(job.record_file, note_state)
        return record
    # The batch script finalises Completed/Failed itself right after srun; give it a moment to do so.
    deadline = time.monotonic() + 30
    while state.status in (records.COMPLETED, records.FAILED) and time.monotonic() < deadline:
        record = records.JobRecord.load(job.record_file)
        if record.status in records.FINAL_STATUSES:
            return record
        time.sleep(POLL_S)
    reason = {JobState.STOPPED: f"stopped: Slurm job {record.backend_info['slurm_job_id']} was cancelled",
              JobState.MAX_RUNTIME_EXCEEDED: "the Slurm time limit (max_run) was reached"}.get(
                  state.status, f"Slurm ended the job: {state.state} {state.reason}".strip())
    return finalize(job, state.status, reason)


class _LogFollower:
    """Shows the lines the nodes file into logs/<host>.log as they arrive."""

    def __init__(self, job: JobDir, hosts: list[str], console: JobConsole) -> None:
        self.files = {h: job.log_file(h) for h in hosts}
        self.console = console
        self.offsets = {h: 0 for h in hosts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="smdist-slurm-logs")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._poll()  # the last lines

    def _run(self) -> None:
        while not self._stop.wait(POLL_S / 2):
            self._poll()

    def _poll(self) -> None:
        for host, path in self.files.items():
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[host])
                    data = f.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # whole lines only
            self.offsets[host] += end
            for raw in data[:end].splitlines():
                self.console.line(host, raw.decode("utf-8", "replace"))


def submit_slurm_job(submission: Submission | LaunchPlan, options: SlurmOptions | None = None, *,
                     jobs_root: str | os.PathLike[str] | None = None, logs: Any = True,
                     environ: dict[str, str] | None = None) -> SlurmJob:
    """Stage the job folder (it must be on a path every node shares) and sbatch the plan's script."""
    options = options or SlurmOptions()
    sub = submission_of(submission)
    script = sbatch_script(sub.plan, options)  # before anything is written: bad options fail
    # the dry run put the options' faults in the policy; a direct call gives them through options
    faults = list(sub.policy.faults) or options.faults_for(sub.plan.host_names, sub.plan.world_size, "slurm")
    resilience = resilience_of(sub.policy)
    plan, code = prepare_local_run(submission)
    job = JobDir.create(resolve_jobs_root(jobs_root), plan.job_name)
    job.plan_file.write_text(plan.to_json())
    # what each node's metrics recorder applies (node.py reads it there)
    MetricsSettings(sub.metric_definitions, sub.step_patterns).save(job.root)
    OutputSettings.of(sub.policy).save(job.root)  # model and output as folders or archives (finish.py)
    record = records.JobRecord(job_name=plan.job_name, job_id=f"{plan.job_name}-slurm", job_dir=str(job.root),
                               plan=plan.to_dict(), backend="slurm", launcher_pid=0)  # no launcher: Slurm runs it
    record.enter_phase(Phase.STAGING)
    record.save(job.record_file)
    try:
        stage_hosts(job, plan, code)  # as each later attempt does (attempts.py)
        slurm_dir = job.root / "slurm"
        slurm_dir.mkdir(exist_ok=True)
        save_code(job, code)
        (slurm_dir / "job.sbatch").write_text(script)
        save_resilience(job, resilience)
        save_faults(job, [str(f) for f in faults])
        env = submission_environment(plan, dict(os.environ if environ is None else environ), job)
        # the nodes' runtimes restart ranks in place and watch the logs themselves: no launcher sees the lines live
        host_resilience = resilience.for_hosts(watch_logs=True)
        if host_resilience.active:
            env[RESILIENCE_ENV] = host_resilience.encode()
        slurm_id = scheduler.submit(script, [f"--chdir={job.root}", f"--output={slurm_dir}/batch-%j.out",
                                             "--export=ALL"], env)
    except BaseException as exc:
        record.finish(records.FAILED, f"the job could not be submitted: {exc}")
        record.save(job.record_file)
        raise
    record.job_id = f"{plan.job_name}-slurm-{slurm_id}"
    record.backend_info = {"slurm_job_id": slurm_id, "script": str(slurm_dir / "job.sbatch")}
    record.enter_phase(Phase.QUEUED)
    record.save(job.record_file)
    result = SlurmJob(job, logs=logs)
    result.console.note(f"submitted {plan.job_name} as Slurm job {slurm_id} ({plan.instance_count} nodes)")
    return result


def run_slurm_job(submission: Submission | LaunchPlan, options: SlurmOptions | None = None, *, wait: bool = True,
                  logs: Any = True, jobs_root: str | os.PathLike[str] | None = None) -> SlurmJob:
    job = submit_slurm_job(submission, options, jobs_root=jobs_root, logs=logs)
    return job.wait() if wait else job
