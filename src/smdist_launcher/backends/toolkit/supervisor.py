"""Start one runtime process per simulated host and end them together.

Each host runs in its own session (process group). The job ends when every host exited 0
(Completed), when ANY host exits non-zero (Failed: all others are stopped at once), when
max_run passes (MaxRuntimeExceeded) or on Ctrl-C / SIGTERM (Stopped). Stopping is SIGTERM
to every group, SIGKILL after `grace` seconds, then a /proc sweep for the job's marker."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .process_sweep import kill_job_processes
from .records import COMPLETED, FAILED, MAX_RUNTIME_EXCEEDED, STOPPED

LineSink = Callable[[str, bytes], None]
POLL_S = 0.05
MAX_LINE_BYTES = 1 << 20  # the longest piece of a host's output read at once (a longer line comes in pieces)


@dataclass(frozen=True)
class HostLaunch:
    host: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    user: str | None = None   # run as this user (its primary group, no supplementary groups); None: as ours


@dataclass(frozen=True)
class HostExit:
    host: str
    code: int
    wall_time: float


@dataclass
class Outcome:
    status: str
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    first_failure: HostExit | None = None
    reason: str = ""
    # Stopped / MaxRuntimeExceeded: where each rank still running was stuck (stack_dumps.RankStack)
    stacks: list[Any] = field(default_factory=list)


class Interrupted(Exception):
    """SIGTERM or SIGHUP (terminal closed, ssh dropped) to the launcher: treated like Ctrl-C."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signal_name = signal.Signals(signum).name
        super().__init__(self.signal_name)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _primary_group(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


class Supervisor:
    def __init__(self, job_id: str, launches: list[HostLaunch], on_line: LineSink, *,
                 max_run: float | None = None, grace: float = 5.0,
                 ask_stacks: Callable[[], list[Any]] | None = None) -> None:
        self.job_id = job_id
        self.ask_stacks = ask_stacks
        self.launches = launches
        self.on_line = on_line
        self.max_run = max_run
        self.grace = grace
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._readers: list[threading.Thread] = []
        self._stop_requested = threading.Event()
        self._stop_reason = ""
        self.started_at: float | None = None

    def request_stop(self, reason: str) -> None:
        """Ask wait() (in any thread) to stop the job with status Stopped."""
        self._stop_reason = reason
        self._stop_requested.set()

    # ---- start ------------------------------------------------------------------------------------
    def start(self) -> None:
        self.started_at = time.monotonic()
        try:
            for launch in self.launches:
                # The credentials change before preexec_fn runs, so the parent-death signal it sets survives it.
                drop: dict[str, Any] = ({"user": launch.user, "group": _primary_group(launch.user),
                                         "extra_groups": []} if launch.user else {})
                proc = subprocess.Popen(
                    launch.argv, env=launch.env, cwd=launch.cwd, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=_TERM_WITH_PARENT, **drop,
                )
                self.procs[launch.host] = proc
                reader = threading.Thread(target=self._pump, args=(launch.host, proc), daemon=True,
                                          name=f"smdist-log-{launch.host}")
                reader.start()
                self._readers.append(reader)
        except BaseException:
            self.stop()
            raise

    def _pump(self, host: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        # Bounded: a host that writes without a newline (root reads it under --run-as) arrives in pieces.
        for line in iter(partial(proc.stdout.readline, MAX_LINE_BYTES), b""):
            self.on_line(host, line)
        proc.stdout.close()

    # ---- wait -------------------------------------------------------------------------------------
    def wait(self) -> Outcome:
        """Block until the job ends; always leaves no process of the job behind."""
        restore = stop_signals_interrupt()
        try:
            try:
                outcome = self._watch()
            except (KeyboardInterrupt, Interrupted) as exc:
                what = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else exc.signal_name
                outcome = Outcome(STOPPED, reason=f"stopped by {what}")
            if outcome.status in (STOPPED, MAX_RUNTIME_EXCEEDED):
                outcome.stacks = self._stacks_of_running_ranks()
        finally:
            restore()
            self.stop()
        outcome.exit_codes = {h: p.returncode for h, p in self.procs.items()}
        return outcome

    def _watch(self) -> Outcome:
        assert self.started_at is not None
        deadline = None if not self.max_run else self.started_at + self.max_run
        while True:
            running = False
            for host, proc in self.procs.items():
                code = proc.poll()
                if code is None:
                    running = True
                elif code != 0:
                    failed = HostExit(host, code, time.time())
                    return Outcome(FAILED, first_failure=failed,
                                   reason=f"host {host} exited with code {_describe_code(code)}")
            if not running:
                return Outcome(COMPLETED)
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome(MAX_RUNTIME_EXCEEDED, reason=f"max_run of {self.max_run:g} s exceeded")
            if self._stop_requested.wait(POLL_S):
                return Outcome(STOPPED, reason=self._stop_reason)

    def _stacks_of_running_ranks(self) -> list[Any]:
        """Before a hung job is killed: each live rank's stack dump, also written to its host's log."""
        if self.ask_stacks is None:
            return []
        try:
            stacks = self.ask_stacks()
        except (KeyboardInterrupt, Interrupted):
            return []  # asked to stop again: no time for diagnostics
        except Exception as exc:  # noqa: BLE001 - diagnostics must never keep a job from stopping
            self.on_line(self.launches[0].host, f"[smdist] could not collect stack dumps: {exc!r}\n".encode())
            return []
        for st in stacks:
            prefix = f"[{st.host} r{st.rank}] "
            self.on_line(st.host, f"{prefix}still running when stopped (pid {st.pid}); its stacks:\n".encode())
            for line in st.dump:
                self.on_line(st.host, f"{prefix}  {line}\n".encode())
        return stacks

    # ---- stop -------------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM every host's group, SIGKILL what is left after `grace`, sweep /proc. Idempotent."""
        live = [p for p in self.procs.values() if p.poll() is None]
        for proc in live:
            _signal_group(proc.pid, signal.SIGTERM)
        end = time.monotonic() + self.grace
        try:
            while any(p.poll() is None for p in live) and time.monotonic() < end:
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C while stopping means "now": straight to SIGKILL
        for proc in live:
            # A group whose leader was reaped is left to the sweep: its pid may be reused already.
            _signal_group(proc.pid, signal.SIGKILL)
        kill_job_processes(self.job_id)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                pass
        for reader in self._readers:
            reader.join(timeout=self.grace)


def _term_with_parent() -> Callable[[], None] | None:
    """Linux: a host runtime gets SIGTERM when the launcher dies (even by SIGKILL), so a killed
    launcher leaves no job behind; the runtime then stops its own children."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def preexec() -> None:  # runs between fork and exec: resolved above, nothing to import here
        prctl(pr_set_pdeathsig, sigterm)

    return preexec


_TERM_WITH_PARENT = _term_with_parent()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _describe_code(code: int) -> str:
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def stop_signals_interrupt() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP raise Interrupted, like Ctrl-C raises KeyboardInterrupt, so the job still
    stops in order (outputs packed, final status recorded). Only possible in the main thread; returns
    the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore
