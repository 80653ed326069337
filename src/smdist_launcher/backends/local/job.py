"""run_job: run a LaunchPlan on this machine, one sandboxed runtime per simulated host.

Phases (recorded in job.json, shown on the status line): staging → starting → running →
uploading → done. Every exit path, Ctrl-C included, ends with no process of the job alive and
a final record; a job that did not complete raises JobFailedError naming the first failure.

LocalJob is the record keeper and the steps of the shared attempt loop (toolkit/attempt/loop.py); its collaborators
each do one thing: host_launches.py stages an attempt's hosts from scratch, progress_watch.py watches the rank lines
for hangs, fault_injection.py fires `--inject` faults, hand_over.py hands hosts to another user, and the placement
(placement.py) sees a PlacementJob, never the job."""
from __future__ import annotations

import atexit
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ...container.hang_detector import Hang, resume_warning
from ...container.hang_watch import hang_message
from ...contract import MLPaths
from ...errors import JobFailedError
from ...jobspec.rules.arguments import DEFAULT_MAX_RUN
from ...plan.model import LaunchPlan
from ..api import JobHandle, Submission
from ..phases import Phase
from ..toolkit import records
from ..toolkit.attempt.book import AttemptBook
from ..toolkit.attempt.kept_layout import attempt_dir, final_trees, keep_hosts
from ..toolkit.attempt.loop import AttemptEnd, AttemptStopped, LoopEnd, run_attempts
from ..toolkit.diagnosis import describe_failure, failure_cause, stop_reason
from ..toolkit.faults import Fault, KilledHost
from ..toolkit.job_console import JobConsole, console_for
from ..toolkit.job_metrics import MetricsSettings, job_recorder, sampled_hosts
from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
from ..toolkit.log_mux import LogMux
from ..toolkit.output_settings import OutputSettings
from ..toolkit.outputs import deliver_job_outputs, save_checkpoints
from ..toolkit.resilience_plan import ResiliencePlan, resilience_of
from ..toolkit.restart_policy import Cause, Decision
from ..toolkit.stack_dumps import RankStack, dump_stacks
from ..toolkit.staging import LocalCode, prepare_local_run, submission_of
from ..toolkit.supervisor import Interrupted, Outcome, Supervisor, stop_signals_interrupt
from .fault_injection import FaultInjector, LiveAttempt
from .final_diagnosis import final_words
from .host_environment import scrub_host_secrets
from .host_launches import HostStager
from .placement import Placement, PlacementJob, ProcessPlacement
from .progress_watch import ProgressWatch
from .record_keeper import RecordKeeper


class LocalJob:
    """A local training job: SageMaker's `estimator.latest_job` for local mode."""

    def __init__(self, plan: LaunchPlan, job_dir: JobDir, *, logs: Any = True, grace: float = 5.0,
                 environ: dict[str, str] | None = None, code: LocalCode | None = None,
                 placement: Placement | None = None, resilience: ResiliencePlan | None = None,
                 faults: list[Fault] | None = None, metrics: MetricsSettings | None = None,
                 max_run: int | None = None) -> None:
        self.plan = plan
        # SageMaker's default when max_run is not given (the plan keeps None: pinned plans do not change)
        self.max_run = max_run or plan.max_run or DEFAULT_MAX_RUN
        self.placement: Placement = placement or ProcessPlacement()
        self.dir = job_dir
        self.job_name = plan.job_name
        self.job_id = f"{plan.job_name}-{uuid.uuid4().hex[:12]}"
        self.grace = grace
        self.environ = dict(os.environ if environ is None else environ)
        self.record = records.JobRecord(job_name=plan.job_name, job_id=self.job_id, job_dir=str(job_dir.root),
                                        plan=plan.to_dict(), backend=self.placement.name)
        self.console: JobConsole = console_for(logs, plan.host_names)
        self.model_data: str | None = None
        self.output_data: str | None = None
        self.handle = JobHandle(backend=self.placement.name, job_name=plan.job_name, job_dir=str(job_dir.root))
        self.diagnosis: str = ""
        self.resilience = resilience or ResiliencePlan()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stop_reason: str | None = None
        self._keeper = RecordKeeper(self.record, job_dir.record_file, self.console, plan.job_name)
        # collaborators
        self._stager = HostStager(self.job_id, job_dir, code, self.placement, self.environ, self.resilience,
                                  self.console.note)
        self._faults = FaultInjector(self.job_id, list(faults or []), self.console.note, self._keeper.injected)
        self._watch = ProgressWatch(self.resilience.monitors, list(range(plan.world_size)),
                                    on_stragglers=self._keeper.stragglers, on_hang=self._hang_found)
        self._book = AttemptBook(self._keeper.attempts)
        # the running (or last) attempt
        self._attempt_no = 0
        self._supervisor: Supervisor | None = None
        self._placement_job: PlacementJob | None = None
        self._host_paths: dict[str, MLPaths] = {}
        self._outcome: Outcome | None = None
        self._failure: tuple[str, str] | None = None  # the last failed attempt's (reason, diagnosis)
        self._preempted = False
        self._restored = 0
        self._ranks_up = 0
        self._stopping_ns: int | None = None
        self._log_failure: str | None = None  # a log consumer's first failure: the attempt stops and fails with it
        # metric_definitions over every rank line, each host's system samples: <job>/metrics.jsonl
        self.metrics = job_recorder(job_dir.root, metrics or MetricsSettings(), on_progress=self._show_progress,
                                    on_note=self.console.note)
        job_dir.plan_file.write_text(plan.to_json())
        self._keeper.save()
        _finish_interrupted_jobs(job_dir.root.parent)

    # ---- SageMaker-like surface -----------------------------------------------------------------
    @property
    def job_dir(self) -> Path:
        return self.dir.root

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def failure_reason(self) -> str | None:
        return self.record.failure_reason

    @property
    def faults(self) -> list[Fault]:
        """The faults still to fire."""
        return self._faults.faults

    def describe(self) -> dict[str, Any]:
        """The job record (SageMaker's DescribeTrainingJob, in spirit)."""
        return dict(self.record.__dict__)

    def wait(self) -> LocalJob:
        """Block until the job ends; raise JobFailedError unless it completed."""
        if self._thread is not None:
            self._thread.join()
        elif self.record.status == records.IN_PROGRESS:
            self._run()
        if self._error is not None:
            raise self._error
        if self.record.status != records.COMPLETED:
            raise JobFailedError(self.job_name, self.record.status, self.diagnosis, str(self.job_dir))
        return self

    def start_in_background(self) -> None:
        """fit(wait=False): run in a thread; stop() or the interpreter's exit ends it."""
        self._thread = threading.Thread(target=self._run, name=f"smdist-job-{self.job_name}", daemon=True)
        atexit.register(self.stop, "stopped: the Python process that started it is exiting")
        self._thread.start()

    def stop(self, reason: str = "stopped by stop()") -> None:
        """Stop a running job (status Stopped); wait() then raises JobFailedError."""
        self._stop_reason = reason
        if self._supervisor is not None:
            self._supervisor.request_stop(reason)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _hang_found(self, hang: Hang) -> None:
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.request_stop(f"hang detected by log monitor {hang.monitor!r}")

    # ---- the run --------------------------------------------------------------------------------
    def _run(self) -> None:
        restore_signals = stop_signals_interrupt()  # SIGTERM/SIGHUP during staging too: a final record, no orphans
        self._watch.start()
        try:
            self._finish(run_attempts(self, self.resilience, self._book))
        except (KeyboardInterrupt, Interrupted) as exc:
            self._stop_supervisor()
            what = exc.signal_name if isinstance(exc, Interrupted) else "Ctrl-C"
            self._end(records.STOPPED, f"stopped by {what}", f"stopped by {what} during {self.record.phase}")
        except (OSError, ValueError) as exc:  # staging: missing inputs, bad locations, no GPUs, ...
            self._stop_supervisor()
            self._end(records.FAILED, f"{type(exc).__name__}: {exc}", f"the job could not start: {exc}")
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised by wait()
            self._stop_supervisor()
            self._error = exc
            self._end(records.FAILED, f"internal error: {exc!r}", repr(exc))
        finally:
            self._watch.close()
            self._faults.close()
            restore_signals()
            self._clear_hosts()
            for paths in self._host_paths.values():
                scrub_host_secrets(paths)
            self.metrics.close()
            self.console.close()

    def _stop_supervisor(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()

    def _clear_hosts(self) -> None:
        """Whatever way an attempt ended: nothing of the placement is left, nor the temporary folder, nor a secret in
        a tree whose staging stopped half-way."""
        job = self._placement_job or PlacementJob(self.job_id, self.dir.root, self.plan, self.environ, None,
                                                  self.record.hosts, self.record.backend_info)
        try:
            self.placement.teardown(job)
        except Exception as exc:  # noqa: BLE001 - the job's own outcome stays; the leftover is named
            self.console.note(f"could not clean up the {self.placement.name} hosts: {exc}")
        self._placement_job = None
        tmpdir = Path(self.record.local.get("tmpdir") or "")
        if tmpdir.name.startswith("smdist-"):
            shutil.rmtree(tmpdir, ignore_errors=True)
        for h in self.plan.host_names:
            if self.dir.host_root(h).is_dir():
                scrub_host_secrets(MLPaths(self.dir.host_root(h)))

    # ---- the attempt loop's steps (toolkit/attempt/loop.py) -------------------------------------------
    def run_attempt(self, number: int) -> AttemptEnd:
        """One attempt: stage fresh hosts, start them, wait for the end. Logs append to the job's host logs."""
        if number > 1 and self._stop_reason is not None:  # stop() while between attempts: no hosts started for it
            raise AttemptStopped(self._stop_reason)
        self._attempt_no = number
        self._keeper.phase(Phase.STAGING)
        self.plan = self._stager.plan_for_hosts(self.plan)
        staged = self._stager.stage(self.plan, number, self.record)
        self._keeper.save()
        # what the attempt before left is replaced only now: a restart that could not start finishes with it
        self._placement_job = staged.placement_job
        if number > 1 and self._stop_reason is not None:  # stop() during this staging: the job ends with the
            raise AttemptStopped(self._stop_reason)     # attempt before, its outputs packed (not this one's, empty)
        self._host_paths = hosts = staged.hosts
        self._restored = staged.restored
        self._preempted = False
        self._ranks_up = 0
        self._stopping_ns = None
        self._log_failure = None
        self._watch.attempt_staged()
        self._keeper.phase(Phase.STARTING, f"{len(staged.launches)} hosts")
        mux = LogMux({h: self.dir.log_file(h) for h in hosts}, self.console, on_new_rank=self._rank_up,
                     on_rank_line=self._rank_line, on_error=self._log_consumer_failed)
        if number > 1:
            for h in hosts:
                mux.on_line(h, f"[smdist] ---- attempt {number} ----\n".encode())
        supervisor = Supervisor(self.job_id, staged.launches, mux.on_line, max_run=self.max_run, grace=self.grace,
                                ask_stacks=lambda: self._ask_stacks(hosts))
        self._supervisor = supervisor
        if self._stop_reason is not None:  # stop() came during staging
            supervisor.request_stop(self._stop_reason)
        if self._log_failure is not None:  # the attempt's first log line could not be kept
            supervisor.request_stop(f"the job's logs failed: {self._log_failure}")
        try:
            supervisor.start()
            self.record.hosts = {h: {**self.record.hosts.get(h, {}), "pid": p.pid}
                                 for h, p in supervisor.procs.items()}
            self._keeper.phase(Phase.RUNNING, self._running_detail())
            self._book.mark(Phase.RUNNING)
            self._watch.hosts_started()
            self._faults.attempt_running(LiveAttempt(
                number, {h: p.pid for h, p in supervisor.procs.items()},
                lambda: any(p.poll() is not None for p in supervisor.procs.values()), self._preempt,
                kill_host=getattr(self.placement, "kill_host", None)))
            self.metrics.start_sampling(sampled_hosts({h: p.pid for h, p in supervisor.procs.items()},
                                                      {h: p.root for h, p in hosts.items()},
                                                      {h: self.record.hosts[h].get("gpus", []) for h in hosts},
                                                      locate=getattr(self.placement, "process_root", None)))
            outcome = supervisor.wait()
        finally:
            self.metrics.stop_sampling()
            self._faults.attempt_ended()  # a fault due now waits for the next attempt
            self._watch.attempt_ended()
            mux.close()
        self._outcome = outcome
        return self._ended(outcome, hosts)

    def _log_consumer_failed(self, message: str) -> None:
        """A log consumer failed (the reader drains on): the attempt stops and the job fails with that reason, rather
        than running on with its logs lost."""
        if self._log_failure is None:
            self._log_failure = message
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.request_stop(f"the job's logs failed: {message}")

    def _preempt(self) -> None:
        supervisor = self._supervisor
        if supervisor is not None:
            self._preempted = True
            supervisor.request_stop("preempted (spot interruption rehearsal)")

    def _ended(self, outcome: Outcome, hosts: dict[str, MLPaths]) -> AttemptEnd:
        """How the attempt ended: its cause and reason for the restart policy, what its record keeps."""
        self._failure = None  # this attempt's, read below (the one before stays until this one ended)
        killed = self._faults.killed_in(self._attempt_no)
        hang = self._watch.hang
        cause = attempt_cause(outcome, hosts, hung=hang is not None, preempted=self._preempted, killed=killed,
                              log_files={h: self.dir.log_file(h) for h in hosts})
        reason = outcome.reason
        if self._log_failure is not None:  # whatever else happened: the job's logs are not whole, never retried
            cause, reason = Cause.LAUNCHER_ERROR, f"the job's logs failed: {self._log_failure}"
            self._failure = (reason, f"{reason}\nthe hosts' output was drained on but not kept from then on")
            outcome.status, outcome.reason = records.FAILED, reason
        elif cause is Cause.HANG and hang is not None:
            reason = stop_reason(hang_message(hang), outcome.stacks)
            outcome.status, outcome.reason = records.FAILED, reason  # a hang ends the attempt as a failure
        elif cause is Cause.PREEMPTED:
            reason = "preempted: every host got SIGTERM, as on a spot interruption"
        elif outcome.status == records.FAILED:
            self._failure = describe_failure({h: p.failure_json_file for h, p in hosts.items()},
                                             {h: self.dir.log_file(h) for h in hosts}, outcome.first_failure,
                                             killed)
            reason = self._failure[0]
        facts: dict[str, Any] = {"restored_checkpoints": self._restored, "first_steps": self._watch.first_steps()}
        warning = None
        for step in facts["first_steps"].values():
            warning = warning or resume_warning(self._attempt_no, step, self._restored)
        if warning:
            facts["warning"] = warning
            self.console.note(warning)
        return AttemptEnd(cause, reason, facts)

    def between_attempts(self, number: int, decision: Decision) -> None:
        """Sync the checkpoints out, clear every host away and keep its whole tree under attempts/<number>/: the
        next attempt is staged from scratch (kept_layout.py)."""
        self.console.note(f"job {self.job_name}: retrying ({decision.why})")
        save_checkpoints(self.plan, self._host_paths)
        self._clear_hosts()
        self._host_paths = keep_hosts(self.dir, number, self.plan.host_names)

    # ---- rank lines -------------------------------------------------------------------------------
    def _rank_line(self, host: str, rank: int | None, text: str) -> None:
        self.metrics.line(host, rank, text)
        self._watch.line(rank, text)

    def _rank_up(self, rank: int) -> None:
        self._ranks_up += 1
        now = time.monotonic()
        if self._ranks_up == 1:
            self._watch.first_rank_up(now)
            self._faults.first_rank_up(now)  # the faults' clock: the first rank of the first attempt
        self._keeper.running(self._running_detail())

    def _running_detail(self) -> str:
        progress = self.metrics.progress()
        return (f"{len(self.plan.hosts)}/{len(self.plan.hosts)} hosts up, "
                f"{self._ranks_up}/{self.plan.world_size} ranks seen{'; ' + progress if progress else ''}")

    def _show_progress(self) -> None:
        """A new metric value or step (at most once a second): the status line shows it."""
        self._keeper.running(self._running_detail())

    def _ask_stacks(self, hosts: dict[str, MLPaths]) -> list[RankStack]:
        self._stopping_ns = time.time_ns()  # ranks that leave from here on were stopped, not early
        rank_hosts = {r: h.name for h in self.plan.hosts for r in h.ranks}
        return dump_stacks(self.job_id, {h: p.run_dir / "stacks" for h, p in hosts.items()}, rank_hosts)

    # ---- the end ----------------------------------------------------------------------------------
    def _finish(self, end: LoopEnd) -> None:
        """The last attempt that ran, packed and diagnosed (its trees: the live ones, or kept ones when the next
        attempt could not start)."""
        if end.stopped is not None:  # stopped while the next attempt was prepared: nothing of it may run on
            self._stop_supervisor()
        # the last attempt that ran: its kept trees when the next one was prepared, else the live ones
        outcome, hosts = self._outcome, self._host_paths
        if attempt_dir(self.dir, end.attempt).is_dir():
            hosts = final_trees(self.dir, end.attempt, self.plan.host_names)
        assert outcome is not None
        for h, code in outcome.exit_codes.items():
            self.record.hosts.setdefault(h, {})["exit_code"] = code
        self._keeper.phase(Phase.UPLOADING)
        status, reason = outcome.status, outcome.reason
        # Partial outputs of failed jobs are delivered too (SageMaker uploads output/ on failure); checkpoints also
        # when the outputs failed.
        delivered = deliver_job_outputs(self.plan, hosts, self.dir.output_dir, progress=self.console.note)
        self.model_data, self.output_data = delivered.model_data, delivered.output_data
        if (exc := delivered.error) is not None:  # an upload failure fails the job (a stop while packing stops it)
            status, reason = delivered.settle(status, reason)
            self.console.note(f"uploading outputs failed: {exc}")
        words = final_words(outcome, end, hosts, {h: self.dir.log_file(h) for h in hosts}, status=status,
                            reason=reason, failure=self._failure,
                            rank_hosts={r: h.name for h in self.plan.hosts for r in h.ranks},
                            stopping_ns=self._stopping_ns)
        self.diagnosis = words.diagnosis
        self.record.model_data, self.record.output_data = self.model_data, self.output_data
        self._end(words.status, words.reason, self.diagnosis)

    def _end(self, status: str, reason: str | None, diagnosis: str) -> None:
        self.diagnosis = self.diagnosis or diagnosis
        self._keeper.end(status, reason, self.model_data)


def attempt_cause(outcome: Outcome, hosts: dict[str, MLPaths], *, hung: bool, preempted: bool,
                  killed: KilledHost | None = None, log_files: dict[str, Path] | None = None) -> Cause:
    """Why an attempt ended. Every host exited 0: completed, whatever was noticed meanwhile (a hang or preempt seen
    just after the last host exited must not turn a completed attempt into a failure). `killed`: the host the fault
    rehearsal killed in it; `log_files`: the hosts' logs (a host that left no failure.json may say why there)."""
    if outcome.status == records.COMPLETED:
        return Cause.COMPLETED
    if hung:
        return Cause.HANG
    if preempted:
        return Cause.PREEMPTED
    if outcome.status == records.STOPPED:
        return Cause.STOPPED
    if outcome.status == records.MAX_RUNTIME_EXCEEDED:
        return Cause.MAX_RUNTIME
    return failure_cause({h: p.failure_json_file for h, p in hosts.items()}, outcome.first_failure, killed,
                         log_files)


def _finish_interrupted_jobs(root: Path) -> None:
    """Jobs of this jobs folder whose launcher died are finished before a new one starts (recovery.py)."""
    from .recovery import finalize_interrupted

    try:
        finalize_interrupted(records.list_records(root))
    except Exception:  # noqa: BLE001 - another job's leftovers must never keep this one from running
        pass


def run_job(job: Submission | LaunchPlan, *, wait: bool = True, logs: Any = True,
            jobs_root: str | os.PathLike[str] | None = None, grace: float = 5.0,
            placement: Placement | None = None, run_as: str | None = None,
            faults: list[Fault] | None = None) -> LocalJob:
    """Run a submission (or a bare plan, its code read from the working directory) on this machine. wait=True blocks
    and raises JobFailedError unless the job completed; wait=False returns at once (call .wait()). `placement`:
    how each host runs (default: a process on a loopback address, as the policy's run-as user when given: root
    only). `run_as`/`faults` given here override the submission's run policy (a backend's dry run completed it)."""
    submission = submission_of(job)
    policy = submission.policy
    placement = placement or ProcessPlacement(run_as=policy.run_as if run_as is None else run_as)
    placement.check()
    plan, code = prepare_local_run(submission)
    job_dir = JobDir.create(resolve_jobs_root(jobs_root), plan.job_name)
    OutputSettings.of(policy).save(job_dir.root)  # how collect_outputs delivers, also later
    metrics = MetricsSettings(submission.metric_definitions, submission.step_patterns)
    local = LocalJob(plan, job_dir, logs=logs, grace=grace, code=code, placement=placement,
                     resilience=resilience_of(policy), faults=list(policy.faults if faults is None else faults),
                     metrics=metrics, max_run=policy.max_run)
    if wait:
        return local.wait()
    local.start_in_background()
    return local
