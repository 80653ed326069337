"""One host's run: unpack code, build the environment, run the host's role, write output/success|failure."""
from __future__ import annotations

import codecs
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ..contract import (
    MLPaths,
    decode_hyperparameters,
    read_hyperparameters_raw,
    read_resource_config,
    v3_hyperparameters as v3,
    write_json,
)
from ..contract.hyperparameters import HyperparameterEncoding, to_cmd_args
from ..contract.secrets import (
    SECRET_HPS_ENV,
    decode_secret_env,
    redact_argv,
    redact_hyperparameters_raw,
    restore_argv,
    secret_hyperparameters,
)
from . import failure_reserve, mpirun_parent
from .addressing import HOST_MAP_ENV, map_token, parse_host_map
from .commands import (
    host_option_indexes,
    is_mpirun,
    is_torchrun,
    mpirun_local,
    resolve_python,
    through_rank_entry,
    torchrun_with_tee,
)
from .console import Console
from .container_command import (
    command_argv,
    command_env,
    has_own_opt_ml,
    is_container_command,
    own_failure_lines,
    require_private_opt_ml,
)
from .entry_point_mode import make_executable
from .failure import FailureTracker, signal_name, write_failure, write_success
from .fallback_plan import plan_from_contract
from .group_hosts import real_host_names, rename_hosts
from .hang_detector import Hang, process_restart_notice
from .hang_watch import HangWatch, hang_message
from .host_isolation import HostIsolation, isolate_host, needed as isolation_needed, scratch_env
from .host_resilience import RESILIENCE_ENV, decode as decode_resilience
from .log_lines import FixedRankLines, LineSplitter, MpiTagLines, TorchrunLines
from .multihost import MASTER_DONE_WAIT_S, HostUnreachable, MasterSsh, job_key, master_verdict, ssh_port, worker_hosts
from .process_environment import load_plan, process_env, recorded_environment, write_environment_file
from .process_tree import TERM_WITH_PARENT, become_subreaper, is_alive, terminate_descendants
from .ps_sidecar import ParameterServerSidecar, stop_process
from .rsh_agent import DEFAULT_WAIT_S, LOCAL_HOSTS_ENV, WAIT_ENV
from .rsh_server import RshServer
from .ssh_daemon import SshDaemon
from .stack_dumps import STACKS_ON_STOP_ENV, RankStack, dump_stacks, live_pids
from .submit_directory import install_requirements, prepare_code

STOP_GRACE_S = 5.0
POLL_S = 0.1


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum) or str(signum))
        self.signum = signum


def _raise_stopped(signum: int, _frame: Any) -> None:
    # Only the first signal interrupts; later ones must not break the clean-up.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Stopped(signum)


class HostRuntime:
    def __init__(self, root: str | os.PathLike[str], plan_path: str | os.PathLike[str] | None = None,
                 host: str | None = None, install: bool = True, environ: dict[str, str] | None = None) -> None:
        self.paths = MLPaths(root)
        self.environ = dict(os.environ if environ is None else environ)
        # Local mode: the secret hyperparameters' values; only the script gets them (through hyperparameters.json).
        self._secret_hps = decode_secret_env(self.environ.pop(SECRET_HPS_ENV, None))
        self._secrets_merged = False
        plan_file = plan_path or self.environ.get("SMDIST_PLAN") or self.paths.plan_file
        if not Path(plan_file).exists():
            # On SageMaker the plan ships inside the code archive (.smdist/launchplan.json): unpack it first.
            hps = decode_hyperparameters(read_hyperparameters_raw(self.paths.hyperparameters_file))
            if hps.get("sagemaker_submit_directory"):
                prepare_code(str(hps["sagemaker_submit_directory"]), self.paths.code_dir)
        if plan_path or self.environ.get("SMDIST_PLAN") or Path(plan_file).exists():
            self.plan = load_plan(plan_file)
        else:  # a plain SageMaker job: run like the toolkit's Process runner
            self.plan = plan_from_contract(read_resource_config(self.paths.resource_config_file),
                                           read_hyperparameters_raw(self.paths.hyperparameters_file))
        # heterogeneous clusters: SageMaker, not the plan, decides which hosts form each group
        real = real_host_names(self.plan, read_resource_config(self.paths.resource_config_file))
        self.plan = rename_hosts(self.plan, real)
        names = [h["name"] for h in self.plan["hosts"]]
        self.host = host or read_resource_config(self.paths.resource_config_file).get("current_host") or names[0]
        if self.host not in names:
            raise ValueError(f"host {self.host!r} is not in the plan (hosts: {', '.join(names)}); "
                             "pass --host or fix current_host in resourceconfig.json")
        self.host_plan = next(h for h in self.plan["hosts"] if h["name"] == self.host)
        self.install = install
        self.host_map = parse_host_map(self.environ.get(HOST_MAP_ENV))
        self.local_hosts: dict[str, str] = json.loads(self.environ.get(LOCAL_HOSTS_ENV) or "{}")
        rank_hosts = {r: h["name"] for h in self.plan["hosts"] for r in h.get("ranks") or []}
        self.console = Console(self.host, rank_hosts=rank_hosts)
        self.tracker = FailureTracker(self.host, list(self.host_plan.get("ranks") or []), rank_hosts)
        self.command: list[str] = []
        self.server: RshServer | None = None
        self.ps: ParameterServerSidecar | None = None
        # Real hosts (no $SMDIST_LOCAL_HOSTS): workers run sshd, the master mpirun over ssh (container/multihost.py).
        self.sshd: SshDaemon | None = None
        self.master_ssh: MasterSsh | None = None
        self._worker: subprocess.Popen[bytes] | None = None
        self._worker_lock = threading.Lock()
        self._failure_written = False
        self._abort_worker = False  # the parameter server died: the worker must not (keep) run(ning)
        self.isolation = HostIsolation(reason="not needed")
        self.scratch: Path | None = None  # this host's temp folder (TMPDIR, Open MPI) when hosts share the machine
        # process restarts and, where no launcher watches the ranks, log monitoring (container/host_resilience.py)
        self.resilience = decode_resilience(self.environ.get(RESILIENCE_ENV))
        self.hang_watch: HangWatch | None = None
        self._hang_stacks: list[RankStack] = []

    # ---- steps ----------------------------------------------------------
    def _isolate(self) -> None:
        """Local mode: this host's own /opt/ml and hostname, and with several hosts on one machine its own scratch
        folder (container/host_isolation.py), before any thread or child exists. The fallback is said once (first
        host)."""
        if len(self.local_hosts) > 1:
            self.scratch = Path(tempfile.mkdtemp(prefix=f"{self.host}-"))
        # a container command uses absolute /opt/ml paths: its host needs a private /opt/ml even when alone
        command = is_container_command(self.plan) and not has_own_opt_ml(self.paths.root)
        if not isolation_needed(self.paths.root, self.local_hosts) and not command:
            return
        self.isolation = isolate_host(self.host, self.paths.root, addresses=self.host_map, scratch=self.scratch,
                                      environ=self.environ)
        write_json(self.paths.run_dir / "isolation.json", dict(self.isolation.__dict__))
        if command:
            require_private_opt_ml(self.paths.root, self.isolation.opt_ml, self.isolation.reason)
        if not self.isolation.opt_ml and self.host == self.plan["hosts"][0]["name"]:
            self.console.say(self.isolation.fallback_note(self.paths.root))

    def _prepare(self) -> dict[str, str]:
        for d in self.paths.all_dirs():
            d.mkdir(parents=True, exist_ok=True)
        # room for failure.json before the script runs: a script that fills the disk must still be told apart from a
        # lost host (failure_reserve.py)
        failure_reserve.take(self.paths.output_dir)
        self._isolate()
        self.paths.rsh_file.unlink(missing_ok=True)  # a stale one would send the master's agent to a dead port
        write_json(self.paths.run_dir / "runtime.json", {"pid": os.getpid(), "host": self.host})
        self._merge_secret_hyperparameters()
        hps = decode_hyperparameters(read_hyperparameters_raw(self.paths.hyperparameters_file))
        submit = hps.get("sagemaker_submit_directory") or self.plan.get("source_dir")
        self.console.say(prepare_code(str(submit) if submit else None, self.paths.code_dir))
        # a container command names its own program (argv[0]), not a file of the code dir
        not_executable = (None if is_container_command(self.plan)
                          else make_executable(self.paths.code_dir, self.plan.get("entry_point")))
        if not_executable:
            self.console.say(not_executable)
        if self.install:
            code = install_requirements(self.paths.code_dir)
            if code not in (None, 0):
                raise RuntimeError(f"InstallRequirementsError: pip install -r requirements.txt exited with {code}")
        env = process_env(self.paths, self.plan, self.host_plan, self.environ, self.host_map,
                          seen=MLPaths(self.isolation.seen_root(self.paths.root)))
        if is_container_command(self.plan):
            env = command_env(env, self.paths.run_dir / "bin")
        if self.scratch is not None:
            env.update(scratch_env(self.scratch, mpi_master=self.host_plan["role"] == "mpi_master"))
        job_keys = [*(self.plan.get("environment") or {}), *(self.host_plan.get("env") or {})]
        write_environment_file(self.paths.environment_file, recorded_environment(env, self.environ, job_keys))
        return env

    # ---- secret hyperparameters (contract.secrets) ---------------------------------------------
    def _merge_secret_hyperparameters(self) -> None:
        """Local mode: put the real values into this host's hyperparameters.json (0600) for the script."""
        if not self._secret_hps:
            return
        raw = read_hyperparameters_raw(self.paths.hyperparameters_file)
        raw.update({k: v for k, v in self._secret_hps.items() if k in raw})
        write_json(self.paths.hyperparameters_file, raw, mode=0o600)
        self._secrets_merged = True

    def _scrub_secret_hyperparameters(self) -> None:
        """The job folder outlives the host: leave hyperparameters.json as it was written (values redacted)."""
        if self._secrets_merged:
            raw = read_hyperparameters_raw(self.paths.hyperparameters_file)
            write_json(self.paths.hyperparameters_file, redact_hyperparameters_raw(raw))
            self._secrets_merged = False

    def _hyperparameter_keys(self) -> list[str]:
        raw = read_hyperparameters_raw(self.paths.hyperparameters_file)
        return [*raw, *(self.plan.get("hyperparameters") or {}), *(self.plan.get("sagemaker_hyperparameters") or {})]

    def _with_secrets(self, argv: list[str]) -> list[str]:
        """The plan's argv holds REDACTED after each secret flag: the values come from hyperparameters.json, as
        the job's encoding makes the argument (v2: the toolkit's str(); v3: its drivers' JSON: `true`, `null`)."""
        raw = secret_hyperparameters(read_hyperparameters_raw(self.paths.hyperparameters_file))
        if self.plan.get("hyperparameter_encoding") == HyperparameterEncoding.V3.value:
            args = {k: v3.cli_args(v3.decode({k: v}))[1] for k, v in raw.items()}
        else:
            args = {k: to_cmd_args({k: v})[1] for k, v in decode_hyperparameters(raw).items()}
        return restore_argv(argv, args) if args else argv

    def shown(self, argv: list[str]) -> list[str]:
        """argv as logs and failure records may show it."""
        return redact_argv(argv, self._hyperparameter_keys())

    def _argv(self) -> tuple[list[str], LineSplitter]:
        argv, splitter = self._runnable_argv()
        return self._with_secrets(argv), splitter

    def _runnable_argv(self) -> tuple[list[str], LineSplitter]:
        argv, splitter = self._launcher_argv()
        return through_rank_entry(argv, self.plan.get("entry_point")), splitter

    def _launcher_argv(self) -> tuple[list[str], LineSplitter]:
        if is_container_command(self.plan):
            return command_argv(self.host_plan), FixedRankLines(None)
        argv = resolve_python([str(a) for a in self.host_plan.get("argv") or []])
        if not argv:
            raise ValueError(f"plan host {self.host}: role {self.host_plan['role']!r} needs a non-empty argv")
        if is_mpirun(argv):
            keep = host_option_indexes(argv) if self.local_hosts else set()
            argv = [t if i in keep else map_token(t, self.host_map) for i, t in enumerate(argv)]
            agent: bool | str = self.master_ssh.agent if self.master_ssh is not None else bool(self.local_hosts)
            return mpirun_local(argv, agent=agent), MpiTagLines()
        argv = [map_token(t, self.host_map) for t in argv]
        if is_torchrun(argv):
            return torchrun_with_tee(argv), TorchrunLines()
        ranks = self.host_plan.get("ranks") or [None]
        return argv, FixedRankLines(ranks[0])

    def _serve_rsh(self, env: dict[str, str]) -> None:
        # Real hosts: only our sshd's forced command (container/ssh_command.py) talks to it, from this host.
        address = self.host_map.get(self.host, "127.0.0.1")
        self.server = RshServer(self.host, address, env, str(self.paths.code_dir), self.paths.rsh_file,
                                self.console.say)

    def _run_launcher(self, argv: list[str], env: dict[str, str], splitter: LineSplitter) -> int:
        self.command = self.shown(argv)  # what logs and failure.json show: secret values redacted
        self.console.say(f"running: {shlex.join(self.command)}")  # quoted: `sh -c 'exec "$0" "$@"'` reads right
        with self._worker_lock:
            mpirun = is_mpirun(argv)
            # mpirun outlives a kill of the runtime's group just long enough to stop the ranks it started itself (the
            # host's own ones run without an orted: host_isolation.py), under a one-thread parent that passes it one
            # SIGTERM: a second makes mpirun exit without stopping them (container/mpirun_parent.py says why)
            proc = subprocess.Popen(mpirun_parent.command(argv) if mpirun else argv, env=env,
                                    cwd=str(self.paths.code_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, preexec_fn=TERM_WITH_PARENT, start_new_session=mpirun)
            self._worker = proc
            if self._abort_worker:
                proc.terminate()
        self._watch_hangs()
        watch = self.hang_watch
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            pairs = splitter.feed(decoder.decode(chunk)) if chunk else splitter.feed(decoder.decode(b"", final=True))
            if not chunk:
                pairs += splitter.flush()
            now = time.time_ns()
            for rank, line in pairs:
                self.tracker.observe(rank, line, now)
                self.console.line(rank, line)
                if watch is not None:
                    watch.line(rank, line)
            if not chunk:
                break
        return proc.wait()

    def _run_with_restarts(self, argv: list[str], env: dict[str, str], splitter: LineSplitter) -> int:
        """The host's launcher (a lone process, or torchrun on one host: the jobspec's rule) starts again in place up
        to process_restarts times; never after a hang, which ends the host's attempt. A fresh torchrun rather than
        its own --max-restarts: a restarted torchrun agent keeps its store, and the new ranks read the previous
        round's peer addresses from it (gloo 'connectFullMesh failed', torch 2.13)."""
        code = self._run_launcher(argv, env, splitter)
        restarts = self.resilience.process_restarts if not is_mpirun(argv) else 0
        for n in range(1, restarts + 1):
            if code == 0 or (self.hang_watch is not None and self.hang_watch.hang is not None):
                break
            self.console.say(process_restart_notice(code, n, restarts))
            if self.hang_watch is not None:  # the restarted ranks get start_after_s again to reload
                self.hang_watch.restarted()
            self.tracker = FailureTracker(self.host, list(self.host_plan.get("ranks") or []), self.tracker.rank_hosts)
            code = self._run_launcher(argv, env, splitter)
        return code

    def _watch_hangs(self) -> None:
        """Log monitoring here, once, from the first launch on (start_after_s counts from it)."""
        if self.hang_watch is None and self.resilience.monitors:
            ranks = [int(r) for r in self.host_plan.get("ranks") or []] or [0]
            self.hang_watch = HangWatch(self.resilience.monitors, ranks, self._on_hang)
            self.hang_watch.host_started()  # ranks silent from the start (rendezvous, NCCL init) hang too
            self.hang_watch.start()

    def _on_hang(self, hang: Hang) -> None:
        """From the watch thread: say it, then stop the launcher; run() records the hang once the ranks are down."""
        self.console.say(f"{hang_message(hang)}: dumping every rank's stack, then stopping this host's ranks")
        self._hang_stacks = self._stacks_of_ranks(force=True)
        with self._worker_lock:
            worker = self._worker
        if worker is not None:
            stop_process(worker, STOP_GRACE_S)

    def _record_hang(self, hang: Hang) -> None:
        stacks = self._hang_stacks
        lines = [hang_message(hang)]
        for st in stacks:
            lines += [f"rank {st.rank} (pid {st.pid}) {st.where}", *(f"  {x}" for x in st.dump[-12:])]
        d = {**self.tracker.diagnosis(1, self.command), "host": self.host,
             "rank": hang.stuck_ranks[0] if hang.stuck_ranks else None, "exit_code": 1, "signal": None,
             "time": time.time_ns(), "traceback": lines, "likely_victim": False, "hint": None, "cause": "hang",
             "still_running": [st.to_dict() for st in stacks]}
        write_failure(self.paths.output_dir, d)
        self._failure_written = True
        self.console.say(f"failed: {hang_message(hang)}; see {self.paths.failure_file}")

    def _stop_worker(self) -> None:
        """Called from the parameter server's output thread when it died first."""
        with self._worker_lock:
            self._abort_worker = True
            worker = self._worker
        if worker is not None:
            stop_process(worker, STOP_GRACE_S)

    def _run_ps_host(self, argv: list[str], env: dict[str, str], splitter: LineSplitter) -> int:
        """The TF toolkit's ps host: the parameter server in the background, then the worker, whose exit decides."""
        self.ps = ParameterServerSidecar(env, str(self.paths.code_dir), self.console.say, self._stop_worker)
        code = self._run_launcher(argv, env, splitter)
        self.ps.stop(STOP_GRACE_S)
        if self.ps.exit_code is not None:
            d = self.ps.diagnosis(self.host)
            write_failure(self.paths.output_dir, d)
            self.console.say(f"failed: {d['traceback'][-1]}; see {self.paths.failure_file}")
            self._failure_written = True
            return 1
        return code

    def _master_done(self) -> str | None:
        """Has the MPI master finished or vanished? Local mode looks at its files; real hosts get its verdict
        over ssh (`smdist-done`), and a master that never sends one counts as gone after MASTER_DONE_WAIT_S."""
        if self.sshd is not None:
            self.sshd.check()  # our sshd died: the master cannot reach this host any more
            return master_verdict(self.paths)
        master = (self.plan.get("master") or {}).get("host")
        root = self.local_hosts.get(master) if master and master != self.host else None
        if root is None:
            return None
        out = MLPaths(root)
        if out.success_file.exists():
            return "succeeded"
        if out.failure_json_file.exists() or out.failure_file.exists():
            return "failed"
        try:
            pid = int(json.loads((out.run_dir / "runtime.json").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None  # not started yet
        return None if is_alive(pid) else "gone"

    def _await_master_outcome(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self._master_done()
            if state is not None or not (self.local_hosts or self.sshd) or time.monotonic() > deadline:
                return state if state is not None or self.sshd is None else "gone"
            time.sleep(POLL_S)

    def _run_mpi_worker(self) -> int:
        assert self.server is not None
        wait_s = float(self.environ.get(WAIT_ENV) or DEFAULT_WAIT_S)
        deadline = time.monotonic() + wait_s
        self.console.say(f"MPI worker: serving orted start-up at {self.server.address}:{self.server.port}")
        master_state: str | None = None
        master_seen_at: float | None = None
        while True:
            if self.server.started and not self.server.active:
                codes = self.server.exit_codes
                self.console.say(f"orted exited ({', '.join(map(str, codes))}); the master's mpirun is done")
                # orted exits 0 even when another rank failed: the job's outcome is the master's.
                # Returns as soon as the master's verdict is there; the bound only matters for a master that never
                # writes one, and a loaded machine can take seconds to end a master's mpirun.
                outcome = self._await_master_outcome(MASTER_DONE_WAIT_S)
                if outcome in ("failed", "gone"):
                    self.console.say(f"the MPI master {outcome}: this host fails with it")
                return 0 if all(c == 0 for c in codes) and outcome not in ("failed", "gone") else 1
            master_state = master_state or self._master_done()
            if master_state is not None:
                master_seen_at = master_seen_at or time.monotonic()
                # Give our orted a moment to notice its mpirun is gone before we stop it.
                if not self.server.started or time.monotonic() - master_seen_at > STOP_GRACE_S:
                    self.console.say(f"the MPI master {master_state}" +
                                     ("" if self.server.started else " before starting ranks on this host"))
                    return 0 if master_state == "succeeded" else 1
            if not self.server.started and time.monotonic() > deadline:
                raise TimeoutError(f"MPI worker {self.host}: the master's mpirun did not start ranks here within "
                                   f"{wait_s:.0f} s (${WAIT_ENV}); is the master host running?")
            time.sleep(POLL_S)

    # ---- whole run --------------------------------------------------------
    def run(self) -> int:
        become_subreaper()
        old = {s: signal.signal(s, _raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}
        code = 1
        try:
            try:
                env = self._prepare()
                role = self.host_plan["role"]
                if role in ("mpi_master", "mpi_worker") and self.local_hosts:
                    self._serve_rsh(env)
                if role == "mpi_worker":
                    if not self.local_hosts:
                        self._start_sshd(env)
                    code = self._run_mpi_worker()
                    default_rank = None
                else:
                    if role == "mpi_master" and not self.local_hosts and worker_hosts(self.plan):
                        self.master_ssh = MasterSsh(self.paths, self.environ, worker_hosts(self.plan), self.console.say)
                        self.master_ssh.wait_for_workers()
                    argv, splitter = self._argv()
                    if isinstance(splitter, FixedRankLines) and splitter.rank is not None:
                        env = {**env, "SMDIST_RANK": str(splitter.rank)}  # a plain script has no RANK variable
                    if role == "ps":
                        code = self._run_ps_host(argv, env, splitter)
                    else:
                        code = self._run_with_restarts(argv, env, splitter)
                    if self.hang_watch is not None:
                        self.hang_watch.stop()  # a hang seen after the ranks finished is none
                    if self.master_ssh is not None:
                        self.master_ssh.notify_done(code)
                    # Without rank evidence a launcher failure (torchrun, mpirun, orted) is not pinned on a rank.
                    default_rank = splitter.rank if isinstance(splitter, FixedRankLines) else None
                if code != 0 and self.hang_watch is not None and self.hang_watch.hang is not None:
                    self._record_hang(self.hang_watch.hang)
                elif not self._failure_written:
                    self._finish(code, default_rank)
            except Stopped as stop:
                self.console.say(f"received {stop}: stopping every process of this host")
                stacks = self._stacks_of_ranks()
                self._cleanup()
                self._record_failure(128 + stop.signum, None, sig=str(stop), victim=True, stacks=stacks)
                code = 1
            except Exception as e:  # noqa: BLE001 - a framework error: the toolkit writes "Framework Error" and exits 1
                self._cleanup()
                self.console.say(f"Framework Error: {e}")
                self._record_failure(1, None, tb=traceback.format_exc().splitlines()[-20:],
                                     host=e.host if isinstance(e, HostUnreachable) else None)
                code = 1
            for s in old:  # the result is written: a late signal must not interrupt the final clean-up
                signal.signal(s, signal.SIG_IGN)
            self._cleanup()
            return 0 if code == 0 else 1
        finally:
            self._scrub_secret_hyperparameters()
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
            for s, h in old.items():
                signal.signal(s, h)

    def _finish(self, code: int, default_rank: int | None) -> None:
        if code == 0:
            write_success(self.paths.output_dir)
            self.console.say("success")
        else:
            self._record_failure(code, default_rank)

    def _record_failure(self, code: int, default_rank: int | None, sig: str | None = None,
                        tb: list[str] | None = None, victim: bool = False, host: str | None = None,
                        stacks: list[RankStack] | None = None) -> None:
        d = self.tracker.diagnosis(code, self.command, default_rank, sig)
        if stacks:
            d["still_running"] = [st.to_dict() for st in stacks]
        if tb:
            d["traceback"] = tb
        if host is not None:  # the failure is another host's (a worker whose sshd never answered)
            d["host"] = host
        d["likely_victim"] = d["likely_victim"] or victim or self.host_plan["role"] == "mpi_worker"
        if is_container_command(self.plan):  # the command's own reason, as SageMaker's FailureReason shows it
            d["traceback"] = own_failure_lines(self.paths.output_dir) or d.get("traceback")
        write_failure(self.paths.output_dir, d)
        who = f"rank {d['rank']}" if d["rank"] is not None else "the host"
        self.console.say(f"failed: {who} exited with code {d['exit_code']}" +
                         (f" ({d['signal']})" if d["signal"] else "") + f"; see {self.paths.failure_file}")

    def _start_sshd(self, env: dict[str, str]) -> None:
        """A worker on a real host: serve orted start-up locally, behind our own sshd (container/ssh_daemon.py)."""
        self._serve_rsh(env)
        self.sshd = SshDaemon(self.paths, self.host, job_key(self.environ), ssh_port(self.environ), env)
        self.console.say(f"MPI worker: sshd listening on port {self.sshd.port}")

    def _stacks_of_ranks(self, force: bool = False) -> list[RankStack]:
        """Stopped from outside (SageMaker: StopTrainingJob, max_run) or hung: where each rank still running was
        stuck, asked before they are stopped, into the log and failure.json."""
        if self.environ.get(STACKS_ON_STOP_ENV) == "0" and not force:
            return []
        rank_hosts = {r: h["name"] for h in self.plan["hosts"] for r in h.get("ranks") or []}
        try:
            stacks = dump_stacks({self.host: self.paths.run_dir / "stacks"}, live_pids(), rank_hosts)
        except Exception as exc:  # noqa: BLE001 - diagnostics must never keep a host from stopping
            self.console.say(f"could not collect stack dumps: {exc!r}")
            return []
        for st in stacks:
            self.console.line(st.rank, f"still running when stopped (pid {st.pid}) {st.where}; its stacks:")
            for line in st.dump:
                self.console.line(st.rank, f"  {line}")
        return stacks

    def _cleanup(self) -> None:
        if self.hang_watch is not None:
            self.hang_watch.stop()
        if self.sshd is not None:
            self.sshd.stop()
        if self.server is not None:
            self.server.close()
        if self.ps is not None:
            self.ps.expect_exit()  # the sweep below stops it together with the worker
        left = terminate_descendants(STOP_GRACE_S)
        if left:
            self.console.say(f"killed {len(left)} process(es) that ignored SIGTERM")
        if self.master_ssh is not None:  # after our ranks are stopped; a no-op when the workers were told already
            self.master_ssh.notify_done(1, attempts=1)


def main_run(root: str, plan: str | None, host: str | None, install: bool) -> int:
    try:
        runtime = HostRuntime(root, plan, host, install)
    except (OSError, ValueError) as e:
        print(f"smdist-train: {e}", file=sys.stderr, flush=True)
        paths = MLPaths(root)
        try:
            write_failure(paths.output_dir, {"host": host, "rank": None, "exit_code": 1, "signal": None,
                                             "time": time.time_ns(), "traceback": [str(e)], "likely_victim": False,
                                             "command": []})
        except OSError:
            pass
        return 1
    return runtime.run()
