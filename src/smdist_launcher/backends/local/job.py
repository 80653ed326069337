"""run_job: run a LaunchPlan on this machine, one sandboxed runtime per simulated host.

Phases (recorded in job.json, shown on the status line): staging → starting → running →
uploading → done. Every exit path, Ctrl-C included, ends with no process of the job alive and
a final record; a job that did not complete raises JobFailedError naming the first failure."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ...container.hang_detector import Hang, HangDetector, resume_warning
from ...container.hang_watch import hang_message
from ...container.host_resilience import RESILIENCE_ENV
from ...container.stack_dumps import STACKS_ON_STOP_ENV, rank_pids
from ...contract import MLPaths, write_host_config
from ...errors import JobFailedError
from ...jobspec.rules.arguments import DEFAULT_MAX_RUN
from ...plan.model import LaunchPlan
from ..api import JobHandle, Submission
from ..toolkit import records
from ..toolkit.diagnosis import describe_failure, describe_stop, early_exits, failure_cause, read_failures, stop_reason
from ..toolkit.faults import Fault
from ..toolkit.job_console import JobConsole, console_for
from ..toolkit.job_metrics import MetricsSettings, job_recorder, sampled_hosts
from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
from ..toolkit.log_mux import LogMux
from ..toolkit.outputs import checkpoint_dir, collect_outputs, restore_checkpoints, save_checkpoints
from ..toolkit.resilience_plan import ATTEMPT_ENV, ResiliencePlan, resilience_of
from ..toolkit.restart_policy import Attempt, Cause, Decision, decide
from ..toolkit.stack_dumps import RankStack, dump_stacks
from ..toolkit.staging import LocalCode, prepare_local_run, stage_channels, stage_code, submission_of
from ..toolkit.supervisor import HostLaunch, Interrupted, Outcome, Supervisor, stop_signals_interrupt
from .addressing import free_port, host_addresses, pick_address_block, split_gpus, visible_gpus
from .host_environment import host_environment, scrub_host_secrets
from .localize import with_interface, with_master_port
from .placement import HostStart, Placement, ProcessPlacement, runtime_command

GPU_INSTANCE_TYPES = ("local_gpu",)


class LocalJob:
    """A local training job: SageMaker's `estimator.latest_job` for local mode."""

    def __init__(self, plan: LaunchPlan, job_dir: JobDir, *, logs: Any = True, grace: float = 5.0,
                 environ: dict[str, str] | None = None, code: LocalCode | None = None,
                 placement: Placement | None = None, resilience: ResiliencePlan | None = None,
                 faults: list[Fault] | None = None, metrics: MetricsSettings | None = None) -> None:
        self.plan = plan
        self.placement: Placement = placement or ProcessPlacement()
        self.code = code
        self.dir = job_dir
        self.job_name = plan.job_name
        self.job_id = f"{plan.job_name}-{uuid.uuid4().hex[:12]}"
        self.grace = grace
        self.environ = dict(os.environ if environ is None else environ)
        self.record = records.JobRecord(job_name=plan.job_name, job_id=self.job_id, job_dir=str(job_dir.root),
                                        plan=plan.to_dict(), backend=self.placement.name)
        self.console: JobConsole = console_for(logs, plan.host_names)
        self.model_data: str | None = None
        self.handle = JobHandle(backend=self.placement.name, job_name=plan.job_name, job_dir=str(job_dir.root))
        self.output_data: str | None = None
        self.diagnosis: str = ""
        self._thread: threading.Thread | None = None
        self._supervisor: Supervisor | None = None
        self._stop_reason: str | None = None
        self._tmp_root: Path | None = None
        self._error: BaseException | None = None
        self._ranks_up = 0
        self._stopping_ns: int | None = None
        self.resilience = resilience or ResiliencePlan()
        self.faults = list(faults or [])
        self._attempt_no = 0
        self._restored = 0
        self._hang: Hang | None = None
        self._interrupted_by: str | None = None
        self._detector: HangDetector | None = None
        self._done = threading.Event()
        self._first_rank_at: float | None = None
        self._injector: threading.Timer | None = None
        self._attempt_live = False  # hosts of the current attempt run and nothing has ended it yet
        self._host_paths: dict[str, MLPaths] = {}
        self._failure: tuple[str, str] | None = None  # the last failed attempt's (reason, diagnosis)
        self._attempt_times: dict[str, float] = {}
        self._record_lock = threading.Lock()
        # metric_definitions over every rank line, each host's system samples: <job>/metrics.jsonl
        self.metrics = job_recorder(job_dir.root, metrics or MetricsSettings(), on_progress=self._show_progress)
        job_dir.plan_file.write_text(plan.to_json())
        self._save()
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

    # ---- the run --------------------------------------------------------------------------------
    def _save(self) -> None:
        with self._record_lock:  # the progress watcher saves too (stragglers)
            self.record.save(self.dir.record_file)

    def _phase(self, name: str, detail: str = "") -> None:
        self.record.enter_phase(name)
        self._save()
        self.console.status(f"{self.job_name}: {name}{' — ' + detail if detail else ''}")

    def _run(self) -> None:
        hosts: dict[str, MLPaths] = {}
        restore_signals = stop_signals_interrupt()  # SIGTERM/SIGHUP during staging too: a final record, no orphans
        watcher = threading.Thread(target=self._watch_progress, name=f"smdist-progress-{self.job_name}", daemon=True)
        if self.resilience.monitors:
            watcher.start()
        try:
            while True:
                outcome, hosts = self._attempt()
                decision = self._next_step(outcome, hosts)
                if decision.action == "finish":
                    break
                self._between_attempts(hosts, decision.why)
            self._finish(outcome, hosts)
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
            self._done.set()
            restore_signals()
            if self._injector is not None:
                self._injector.cancel()
            try:
                self.placement.teardown(self)
            except Exception as exc:  # noqa: BLE001 - the job's own outcome stays; the leftover is named
                self.console.note(f"could not clean up the {self.placement.name} hosts: {exc}")
            for paths in hosts.values():
                scrub_host_secrets(paths)
            if self._tmp_root is not None:
                shutil.rmtree(self._tmp_root, ignore_errors=True)
            self.metrics.close()
            self.console.close()

    def _stop_supervisor(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()

    def _attempt(self) -> tuple[Outcome, dict[str, MLPaths]]:
        """One attempt: stage the hosts, start them, wait for the end. Logs append to the job's host logs."""
        self._attempt_no += 1
        self._attempt_times = {"started": time.time()}
        self._detector = None
        self._hang = None
        self._interrupted_by = None
        self._failure = None
        self._phase("staging")
        launches, hosts = self._prepare()
        self._host_paths = hosts
        self._phase("starting", f"{len(launches)} hosts")
        mux = LogMux({h: self.dir.log_file(h) for h in hosts}, self.console, on_new_rank=self._rank_up,
                     on_rank_line=self._rank_line)
        if self._attempt_no > 1:
            for h in hosts:
                mux.on_line(h, f"[smdist] ---- attempt {self._attempt_no} ----\n".encode())
        # SageMaker's default when max_run is not given (the plan keeps None: pinned plans do not change)
        max_run = self.plan.max_run or DEFAULT_MAX_RUN
        supervisor = Supervisor(self.job_id, launches, mux.on_line, max_run=max_run, grace=self.grace,
                                ask_stacks=lambda: self._ask_stacks(hosts))
        self._supervisor = supervisor
        self._detector = HangDetector(self.resilience.monitors, list(range(self.plan.world_size)))
        if self._stop_reason is not None:  # stop() came during staging
            supervisor.request_stop(self._stop_reason)
        try:
            supervisor.start()
            self.record.hosts = {h: {**self.record.hosts.get(h, {}), "pid": p.pid}
                                 for h, p in supervisor.procs.items()}
            self._phase("running", self._running_detail())
            self._attempt_times["running"] = time.time()
            self._attempt_live = True
            self.metrics.start_sampling(sampled_hosts({h: p.pid for h, p in supervisor.procs.items()},
                                                      {h: p.root for h, p in hosts.items()},
                                                      {h: self.record.hosts[h].get("gpus", []) for h in hosts},
                                                      locate=getattr(self.placement, "process_root", None)))
            outcome = supervisor.wait()
        finally:
            self.metrics.stop_sampling()
            self._attempt_live = False  # a fault due now waits for the next attempt
            mux.close()
        return outcome, hosts

    def _cause(self, outcome: Outcome, hosts: dict[str, MLPaths]) -> Cause:
        if self._hang is not None:
            return Cause.HANG
        if self._interrupted_by == "preempt":
            return Cause.PREEMPTED
        if outcome.status == records.COMPLETED:
            return Cause.COMPLETED
        if outcome.status == records.STOPPED:
            return Cause.STOPPED
        if outcome.status == records.MAX_RUNTIME_EXCEEDED:
            return Cause.MAX_RUNTIME
        return failure_cause({h: p.failure_json_file for h, p in hosts.items()}, outcome.first_failure)

    def _next_step(self, outcome: Outcome, hosts: dict[str, MLPaths]) -> Decision:
        """What the restart policy says after this attempt; the attempt, its cause and reason are recorded."""
        cause = self._cause(outcome, hosts)
        reason = outcome.reason
        if self._hang is not None:
            hang = self._hang
            reason = stop_reason(hang_message(hang), outcome.stacks)
        elif cause is Cause.PREEMPTED:
            reason = "preempted: every host got SIGTERM, as on a spot interruption"
        elif outcome.status == records.FAILED:
            self._failure = describe_failure({h: p.failure_json_file for h, p in hosts.items()},
                                             {h: self.dir.log_file(h) for h in hosts}, outcome.first_failure)
            reason = self._failure[0]
        decision = decide(Attempt(self._attempt_no, cause, reason), max_attempts=self.resilience.max_attempts,
                          retry_on=self.resilience.retry_on, use_spot_instances=self.resilience.use_spot)
        entry: dict[str, Any] = {"attempt": self._attempt_no, "cause": cause.value, "reason": reason or None,
                                 "decision": decision.action, "why": decision.why,
                                 "restored_checkpoints": self._restored,
                                 # wall-clock times: staging began, the hosts were started, the attempt ended
                                 **{k: round(v, 3) for k, v in self._attempt_times.items()},
                                 "ended": round(time.time(), 3),
                                 "first_steps": self._detector.first_steps() if self._detector else {}}
        warning = None
        for step in entry["first_steps"].values():
            warning = warning or resume_warning(self._attempt_no, step, self._restored)
        if warning:
            entry["warning"] = warning
            self.console.note(warning)
        self.record.attempts.append(entry)
        if cause is Cause.HANG:  # a hang ends the attempt as a failure with its own reason
            outcome.status, outcome.reason = records.FAILED, reason
        self._save()
        return decision

    def _between_attempts(self, hosts: dict[str, MLPaths], why: str) -> None:
        """Keep the attempt's outputs and failure records, sync the checkpoints out, and clear every host away."""
        kept = self.dir.root / "attempts" / str(self._attempt_no)
        for h, paths in hosts.items():
            if paths.output_dir.exists():
                shutil.copytree(paths.output_dir, kept / h, symlinks=True, dirs_exist_ok=True)
        save_checkpoints(self.plan, hosts)
        self.console.note(f"job {self.job_name}: retrying ({why})")
        self.placement.teardown(self)
        if self._tmp_root is not None:
            shutil.rmtree(self._tmp_root, ignore_errors=True)
            self._tmp_root = None
        self._ranks_up = 0
        self._stopping_ns = None

    # ---- fault rehearsal ---------------------------------------------------------------------------
    def _schedule_faults(self) -> None:
        """The next fault, timed from the first rank's start (of the first attempt)."""
        if not self.faults or self._first_rank_at is None:
            return
        fault = self.faults[0]
        self._arm(fault, max(0.0, self._first_rank_at + fault.at_s - time.monotonic()))

    def _arm(self, fault: Fault, delay: float) -> None:
        self._injector = threading.Timer(delay, self._fire, args=(fault,))
        self._injector.daemon = True
        self._injector.start()

    def _fire(self, fault: Fault) -> None:
        supervisor = self._supervisor
        if self._done.is_set():
            return
        # an attempt whose host has exited is ending: the fault is for the next attempt, once it runs
        if supervisor is None or not self._attempt_live or any(p.poll() is not None for p in supervisor.procs.values()):
            self._arm(fault, 0.5)
            return
        self.faults.pop(0)
        self.console.note(f"injecting {fault}")
        self.record.backend_info.setdefault("injected", []).append(
            {"fault": str(fault), "attempt": self._attempt_no, "at": time.time()})
        try:
            if fault.kind == "kill-host" and fault.target in supervisor.procs:
                os.killpg(supervisor.procs[fault.target].pid, signal.SIGKILL)
            elif fault.kind == "preempt":
                self._interrupted_by = "preempt"
                supervisor.request_stop("preempted (spot interruption rehearsal)")
            elif fault.kind in ("kill-rank", "hang-rank") and fault.target is not None:
                pids = rank_pids(p.run_dir / "stacks" for p in self._host_paths.values())
                pid = pids.get(int(fault.target))
                if pid is None:
                    self.console.note(f"{fault}: rank {fault.target} is not running; nothing injected")
                else:
                    os.kill(pid, signal.SIGKILL if fault.kind == "kill-rank" else signal.SIGSTOP)
        except OSError as exc:
            self.console.note(f"{fault}: {exc}")
        self._schedule_faults()

    def _rank_line(self, host: str, rank: int | None, text: str) -> None:
        self.metrics.line(host, rank, text)
        detector = self._detector
        if detector is not None:
            detector.line(rank, text, time.monotonic())

    def _watch_progress(self) -> None:
        """The hang check, every second while an attempt runs: a hang dumps the stacks and ends the attempt."""
        while not self._done.wait(1.0):
            detector, supervisor = self._detector, self._supervisor
            if detector is None or supervisor is None or self.record.phase != "running":
                continue
            laggards = detector.all_stragglers()
            if laggards != self.record.backend_info.get("stragglers", {}):
                self.record.backend_info["stragglers"] = laggards
                for monitor, ranks in laggards.items():
                    self.console.note(f"stragglers ({monitor}): rank(s) {', '.join(map(str, ranks))} far behind")
                self._save()
            hang = detector.check(time.monotonic())
            if hang is not None and self._hang is None:
                self._hang = hang
                supervisor.request_stop(f"hang detected by log monitor {hang.monitor!r}")

    def _prepare(self) -> tuple[list[HostLaunch], dict[str, MLPaths]]:
        placement = self.placement
        if placement.interface is not None:  # hosts with a network of their own talk over it (plan.json keeps lo)
            self.plan = with_interface(self.plan, placement.interface)
        plan = self.plan
        names = plan.host_names
        gpu_split = (split_gpus(visible_gpus(self.environ), names, plan.processes_per_host)
                     if plan.instance_type in GPU_INSTANCE_TYPES else None)
        addresses = host_addresses(names, pick_address_block()) if placement.shortcuts else None
        run_plan = with_master_port(plan, free_port())
        # Local mode stages every channel as files, like SageMaker's local mode.
        modes = {name: "File" for name in plan.channels}
        plan_dict = run_plan.to_dict()
        hosts = {h: write_host_config(self.dir.host_root(h), plan_dict, h, channels=modes) for h in names}
        stage_channels(plan, hosts, self.dir.staging_dir)
        stage_code(self.code, hosts, keep_out=self.dir.root.parent)
        restored = self._restored = restore_checkpoints(plan, hosts)
        if restored:
            self.console.note(f"restored {restored} checkpoint file(s) from {plan.checkpoint_s3_uri}")
        if any((p.code_dir / "requirements.txt").is_file() for p in hosts.values()):
            self.console.note("requirements.txt is not installed in local mode (it would change this Python "
                              "environment); install it yourself")
        host_roots = {h: str(p.root) for h, p in hosts.items()}
        # Temporary files of the hosts (OpenMPI session dirs, tempfile) go to a short per-job folder
        # that is removed afterwards: short, because OpenMPI puts unix sockets there (108-byte limit).
        self._tmp_root = Path(tempfile.mkdtemp(prefix="smdist-"))
        for h in names:
            self.record.hosts[h] = {"gpus": gpu_split[h] if gpu_split else [], "root": host_roots[h],
                                    **({"address": addresses[h]} if addresses else {})}
        self.record.local = {"master_port": run_plan.master.port, "tmpdir": str(self._tmp_root)}
        placement.setup(self)
        launches = []
        for h in names:
            env = host_environment(
                run_plan, h, self.environ, job_id=self.job_id, addresses=addresses,
                host_roots=host_roots if placement.shortcuts else None,
                gpus=gpu_split[h] if gpu_split else None, checkpoint_dir=str(checkpoint_dir(plan, hosts[h])))
            # Each host's runtime makes its own folder in here (TMPDIR, Open MPI: container/host_isolation.py).
            env["TMPDIR"] = str(self._tmp_root)
            env[STACKS_ON_STOP_ENV] = "0"  # the supervisor asks the ranks where they are stuck before it stops them
            env[ATTEMPT_ENV] = str(self._attempt_no)  # which attempt this is (1 for the first), for the script
            host_resilience = self.resilience.for_hosts(watch_logs=False)  # this loop watches the logs itself
            if host_resilience.active:
                env[RESILIENCE_ENV] = host_resilience.encode()
            argv = runtime_command(sys.executable, host_roots[h], h, str(hosts[h].plan_file))
            launches.append(placement.launch(self, HostStart(h, hosts[h], env, self.dir.host_dir(h), argv)))
        self._save()
        return launches, hosts

    def hand_over(self, env: dict[str, str], host_dir: Path, user_name: str) -> None:
        """Make a host runnable as another user (serve --run-as): its folder and the job's temporary folder owned by
        that user, HOME there (ours is not theirs to read), and the loopback library copied where that user can load
        it (ours lives in our cache, which may be private: an unloadable preload would quietly leave ports on every
        address)."""
        import pwd

        user = pwd.getpwnam(user_name)
        assert self._tmp_root is not None
        for root in (host_dir, self._tmp_root):
            _chown_tree(root, user.pw_uid, user.pw_gid)
        preload = env.get("LD_PRELOAD", "").split()
        if preload:
            library = self._tmp_root / Path(preload[0]).name
            if not library.exists():
                shutil.copy2(preload[0], library)
                os.chmod(library, 0o755)
            env["LD_PRELOAD"] = " ".join([str(library), *preload[1:]])
        env["HOME"] = str(host_dir)
        env.pop("XDG_CACHE_HOME", None)

    def _early_exits(self, hosts: dict[str, MLPaths], outcome: Outcome) -> list[str]:
        """Ranks that exited 0 before the job began to fail or was stopped, while others still ran."""
        before = self._stopping_ns
        if outcome.status == records.FAILED:
            times = [int(f["time"]) for f in read_failures({h: p.failure_json_file for h, p in hosts.items()})
                     if f.get("time")]
            if outcome.first_failure is not None:
                times.append(int(outcome.first_failure.wall_time * 1e9))
            before = min(times, default=before)
        rank_hosts = {r: h.name for h in self.plan.hosts for r in h.ranks}
        return early_exits({h: p.run_dir / "stacks" for h, p in hosts.items()}, rank_hosts, before)

    def _ask_stacks(self, hosts: dict[str, MLPaths]) -> list[RankStack]:
        self._stopping_ns = time.time_ns()  # ranks that leave from here on were stopped, not early
        rank_hosts = {r: h.name for h in self.plan.hosts for r in h.ranks}
        return dump_stacks(self.job_id, {h: p.run_dir / "stacks" for h, p in hosts.items()}, rank_hosts)

    def _running_detail(self) -> str:
        progress = self.metrics.progress()
        return (f"{len(self.plan.hosts)}/{len(self.plan.hosts)} hosts up, "
                f"{self._ranks_up}/{self.plan.world_size} ranks seen{'; ' + progress if progress else ''}")

    def _show_progress(self) -> None:
        """A new metric value or step (at most once a second): the status line shows it."""
        if self.record.phase == "running":
            self.console.status(f"{self.job_name}: running — {self._running_detail()}")

    def _rank_up(self, rank: int) -> None:
        self._ranks_up += 1
        now = time.monotonic()
        if self._ranks_up == 1 and self._detector is not None:
            self._detector.started(now)  # every monitor's clock starts with the attempt's first rank
        if self._first_rank_at is None:
            self._first_rank_at = now
            self._schedule_faults()
        if self.record.phase == "running":
            self.console.status(f"{self.job_name}: running — {self._running_detail()}")

    def _finish(self, outcome: Outcome, hosts: dict[str, MLPaths]) -> None:
        for h, code in outcome.exit_codes.items():
            self.record.hosts.setdefault(h, {})["exit_code"] = code
        self._phase("uploading")
        status, reason = outcome.status, outcome.reason
        try:
            # Partial outputs of failed jobs are delivered too (SageMaker uploads output/ on failure).
            self.model_data, self.output_data = collect_outputs(self.plan, hosts, self.dir.output_dir)
            save_checkpoints(self.plan, hosts)
        except Exception as exc:  # noqa: BLE001 - an upload failure fails the job, with the reason
            if status == records.COMPLETED:
                status, reason = records.FAILED, f"uploading outputs failed: {exc}"
            self.console.note(f"uploading outputs failed: {exc}")
        log_files = {h: self.dir.log_file(h) for h in hosts}
        if self._hang is not None:  # the reason names the monitor and each rank's stack already
            self.diagnosis = describe_stop(reason, log_files, outcome.stacks)
        elif outcome.status == records.FAILED:
            # read once, when the attempt ended (_next_step)
            reason, self.diagnosis = self._failure or describe_failure(
                {h: p.failure_json_file for h, p in hosts.items()}, log_files, outcome.first_failure)
        elif outcome.status in (records.STOPPED, records.MAX_RUNTIME_EXCEEDED):
            self.diagnosis = describe_stop(reason, log_files, outcome.stacks)
            reason = stop_reason(reason, outcome.stacks)
        else:
            self.diagnosis = reason
        if outcome.status != records.COMPLETED:
            early = self._early_exits(hosts, outcome)
            if early:  # a rank that left while the others still ran: what they were likely waiting for
                reason = f"{reason}; {'; '.join(early)}" if reason else "; ".join(early)
                self.diagnosis = f"{self.diagnosis}\n" + "\n".join(early)
        self.record.model_data, self.record.output_data = self.model_data, self.output_data
        self._end(status, reason or None, self.diagnosis)

    def _end(self, status: str, reason: str | None, diagnosis: str) -> None:
        self.diagnosis = self.diagnosis or diagnosis
        self.record.finish(status, reason)
        self._save()
        took = self.record.duration or 0.0
        if status == records.COMPLETED:
            where = f"; model: {self.model_data}" if self.model_data else ""
            self.console.note(f"job {self.job_name} completed in {took:.1f} s{where}")
        else:  # the full diagnosis travels in JobFailedError: one line here
            self.console.note(f"job {self.job_name} {status} after {took:.1f} s: {reason}")


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """chown -R without following links (a staged channel is a link to shared data, left as it is)."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


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
    how each host runs (default: a process on a loopback address, as `run_as` when given: root only)."""
    placement = placement or ProcessPlacement(run_as=run_as)
    placement.check()
    plan, code = prepare_local_run(job)
    job_dir = JobDir.create(resolve_jobs_root(jobs_root), plan.job_name)
    resilience = resilience_of(submission_of(job).settings)
    submission = submission_of(job)
    metrics = MetricsSettings(submission.metric_definitions, submission.step_patterns)
    local = LocalJob(plan, job_dir, logs=logs, grace=grace, code=code, placement=placement, resilience=resilience,
                     faults=faults, metrics=metrics)
    if wait:
        return local.wait()
    local.start_in_background()
    return local
