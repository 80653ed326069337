"""Which rank failed first, and the toolkit-style output/{success,failure} files plus our failure.json."""
from __future__ import annotations

import json
import os
import re
import signal as _signal
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contract.no_follow import open_dir_nofollow, write_bytes_nofollow
from . import failure_reserve
from .full_disk import is_full_disk

TAIL_LINES = 40
_TRACEBACK = "Traceback (most recent call last):"
# torchrun: "failed (exitcode: 1) local_rank: 1 (pid: 7059) of binary: ..."
_TORCHRUN_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
# torchrun logs "failed (exitcode ...)" for one rank only; its ChildFailedError summary lists every failed rank:
#   rank      : 3 (local_rank: 1)
#   exitcode  : -9 (pid: 1234)  (SIGKILL)
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: \d+\)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
# mpirun summaries.
_MPI_PROCESS = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_MPI_EXIT = re.compile(r"Exit code:\s*(-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
_MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+)")
# A traceback that says a peer went away: this rank is probably a victim, not the cause.
_VICTIM = re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|communicator was aborted|"
                     r"DistNetworkError|DistBackendError|recvBytes|Socket Timeout|timed out|Terminated|SIGTERM", re.I)


# Known errors whose cause is the launch setup, not the script's logic: (pattern in the traceback, hint).
_HINTS = (
    (re.compile(r"environment variable (RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT) expected, but not set"),
     "torch's env:// rendezvous needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. torchrun sets them "
     "(distribution torch_distributed); mpirun (distribution mpi) sets OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK "
     "instead: use torch_distributed, or copy those into RANK, WORLD_SIZE and LOCAL_RANK before init_process_group"),
)


def hint_for(lines: list[str]) -> str | None:
    """What to do about a failure whose traceback shows a known launch-setup error."""
    text = "\n".join(lines)
    return next((hint for pattern, hint in _HINTS if pattern.search(text)), None)


# The exception line that ends a Python traceback: "pkg.module.Class: message" or a bare "Class" (torch prefixes each
# line of a rank's traceback with "[rankN]: ").
_EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]: ?)?(?P<cls>(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Timeout|"
                             r"timeout|Interrupt|Exit))(?:: (?P<message>.*))?$")
# Exceptions that are a wait running out whatever they say: the builtin (socket.timeout, asyncio's and
# concurrent.futures' TimeoutError are aliases of it since 3.10/3.11), torchrun's rendezvous.
_TIMEOUT_CLASSES = frozenset({"TimeoutError", "socket.timeout", "RendezvousTimeoutError"})
# torch.distributed's errors are timeouts only in c10d's own words for one (its TCPStore, its sockets, gloo).
_DIST_TIMEOUTS = re.compile("|".join((
    r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined\.",   # TCPStore server
    r"wait timeout after \d+ms, keys?: ",                                          # store.wait / get
    r"barrier timeout after \d+ms, key: ",
    r"The client socket has timed out after \S+ while trying to connect to \(",  # the client's connect
    r"TCP client failed to connect/validate to host \S+ - timed out \(try=",
    r"socket \S+ timed out after \d+ms",                                         # waitForInput
    r"Timed out waiting \d+ms for \w+ operation to complete",                     # a gloo collective
)))
_DIST_ERRORS = frozenset({"DistStoreError", "DistNetworkError", "DistBackendError"})
# The NCCL watchdog logs this, then aborts the process (SIGABRT) or raises it (DistBackendError), by its exact form:
# "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=668, OpType=ALLREDUCE, ...,
# Timeout(ms)=600000) ran for 600097 milliseconds before timing out."
_NCCL_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\(.*\) ran for \d+ milliseconds "
                            r"before timing out")
# A rank ended by these was stopped or killed from outside (the OOM killer, a lost node, a stop): a retry may cure it.
# Any other signal is the process's own doing: SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL are crashes.
OUTSIDE_SIGNALS = frozenset({"SIGKILL", "SIGTERM"})


def exception_of(lines: list[str]) -> tuple[str, str] | None:
    """(class, message) of the exception a traceback ends with (its last exception line), None without one."""
    for line in reversed(lines):
        found = _EXCEPTION_LINE.match(line.strip())
        if found is not None:
            return found["cls"], found["message"] or ""
    return None


def is_timeout(lines: list[str]) -> bool:
    """A rendezvous or collective timed out: by the exception's class (a DistStoreError, DistNetworkError or
    DistBackendError only in c10d's words for a timeout), or the NCCL watchdog's line. Never a word in a message."""
    if any(_NCCL_WATCHDOG.search(line) for line in lines):
        return True
    found = exception_of(lines)
    if found is None:
        return False
    cls, message = found
    name = cls.rpartition(".")[2]
    if cls in _TIMEOUT_CLASSES or name in _TIMEOUT_CLASSES:
        return True
    return name in _DIST_ERRORS and _DIST_TIMEOUTS.search(message) is not None


def signal_name(num: int) -> str | None:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return None


@dataclass
class RankEvent:
    rank: int
    time_ns: int
    exit_code: int | None = None
    signal: str | None = None


@dataclass
class FailureTracker:
    """Fed every output line with the wall-clock time it was read; answers "who failed first"."""

    host: str
    local_to_global: list[int] = field(default_factory=list)
    # rank -> its host (mpirun's output on the master carries every host's ranks).
    rank_hosts: dict[int, str] = field(default_factory=dict)
    tails: dict[int | None, deque[str]] = field(default_factory=dict)
    first_traceback_ns: dict[int, int] = field(default_factory=dict)
    exits: dict[int, RankEvent] = field(default_factory=dict)
    _mpi_rank: int | None = None
    _summary_rank: int | None = None

    def _global(self, local_rank: int) -> int:
        return self.local_to_global[local_rank] if local_rank < len(self.local_to_global) else local_rank

    def _exit(self, rank: int, now: int, exit_code: int | None = None, sig: str | None = None) -> None:
        ev = self.exits.setdefault(rank, RankEvent(rank, now))
        ev.exit_code = exit_code if exit_code is not None else ev.exit_code
        ev.signal = sig or ev.signal

    def observe(self, rank: int | None, line: str, now_ns: int | None = None) -> None:
        now = time.time_ns() if now_ns is None else now_ns
        self.tails.setdefault(rank, deque(maxlen=TAIL_LINES)).append(line)
        if rank is not None:
            if _TRACEBACK in line and rank not in self.first_traceback_ns:
                self.first_traceback_ns[rank] = now
            return
        m = _TORCHRUN_FAILED.search(line)
        if m:
            code = int(m.group(1))
            self._exit(self._global(int(m.group(2))), now, code, signal_name(-code) if code < 0 else None)
        m = _SUMMARY_RANK.match(line)
        if m:
            self._summary_rank = int(m.group(1))  # a global rank already
        m = _SUMMARY_EXIT.match(line)
        if m and self._summary_rank is not None:
            code = int(m.group(1))
            self._exit(self._summary_rank, now, code, signal_name(-code) if code < 0 else None)
            self._summary_rank = None
        m = _MPI_SIGNAL.search(line)
        if m:
            num = int(m.group(2))
            self._exit(int(m.group(1)), now, 128 + num, signal_name(num))
        m = _MPI_ABORT.search(line)
        if m:
            self._exit(int(m.group(1)), now)
        m = _MPI_PROCESS.search(line)
        if m:
            self._mpi_rank = int(m.group(1))
            self._exit(self._mpi_rank, now)
        m = _MPI_EXIT.search(line)
        if m and self._mpi_rank is not None:
            self._exit(self._mpi_rank, now, int(m.group(1)))

    def traceback_of(self, rank: int | None) -> list[str]:
        lines = list(self.tails.get(rank, ()))
        for i in range(len(lines) - 1, -1, -1):
            if _TRACEBACK in lines[i]:
                return lines[i:]
        return lines[-10:]

    def first_failure(self) -> tuple[int | None, int | None]:
        """(rank, time ns) of the earliest failing rank: ranks reported as exited first, else any traceback."""
        candidates = set(self.exits) or set(self.first_traceback_ns)
        if not candidates:
            return None, None

        def when(r: int) -> int:
            times = [t for t in (self.first_traceback_ns.get(r), self.exits[r].time_ns if r in self.exits else None)
                     if t is not None]
            return min(times)

        # torchrun relays each rank's output by polling files, so read order across ranks is only roughly causal:
        # a rank whose traceback says "peer died" loses to one that does not.
        rank = min(candidates, key=lambda r: (self.looks_like_victim(r), when(r), r))
        return rank, when(rank)

    def looks_like_victim(self, rank: int | None) -> bool:
        return bool(_VICTIM.search("\n".join(self.traceback_of(rank))))

    def diagnosis(self, exit_code: int, command: list[str], default_rank: int | None = None,
                  sig: str | None = None) -> dict[str, Any]:
        rank, when = self.first_failure()
        rank = default_rank if rank is None else rank
        event = self.exits.get(rank) if rank is not None else None
        tb = self.traceback_of(rank)
        if rank is None or not tb:
            tb = self.traceback_of(None)
        rank_code = event.exit_code if event and event.exit_code is not None else exit_code
        return {
            "host": self.rank_hosts.get(rank, self.host) if rank is not None else self.host,
            "reported_by": self.host,
            "rank": rank,
            "exit_code": rank_code,
            "signal": sig or (event.signal if event else None) or (signal_name(-exit_code) if exit_code < 0 else None),
            "time": when or time.time_ns(),
            "traceback": tb,
            "likely_victim": bool(_VICTIM.search("\n".join(tb))),  # tb may be the launcher's tail
            "command": command,
            "hint": hint_for(tb),
        }


def failure_text(d: dict[str, Any]) -> str:
    """Toolkit-style message (DescribeTrainingJob shows its first 1024 characters)."""
    who = f"host {d['host']}" + (f", rank {d['rank']}" if d.get("rank") is not None else "")
    sig = f" ({d['signal']})" if d.get("signal") else ""
    body = "\n".join(d.get("traceback") or [])
    hint = f"Hint: {d['hint']}\n" if d.get("hint") else ""
    return (f"ExecuteUserScriptError: {who} failed first with exit code {d['exit_code']}{sig}\n{hint}"
            f"ExitCode {d['exit_code']}\nErrorMessage \"{body}\"\nCommand \"{' '.join(d.get('command') or [])}\"\n")


def write_success(output_dir: Path) -> None:
    """`success`, never through a link the job planted at its name (a link is replaced: Path.touch would create or
    touch its target, as root)."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)  # the runtime's root: trusted
    write_bytes_nofollow(output_dir.parent, f"{output_dir.name}/success", b"")
    failure_reserve.release(output_dir)


def write_failure(output_dir: Path, d: dict[str, Any]) -> None:
    """failure.json always; `failure` only when the user script did not write its own reason. Neither is written
    through a link the job planted in its output folder. On a full disk failure.json goes over the reserve the runtime
    took at start (failure_reserve.py), its `disk_full` saying why: the launcher must not take a host that filled its
    disk for a lost one. OSError when even that could not be written."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)  # the runtime's root: trusted
    root, folder = output_dir.parent, output_dir.name
    try:
        write_bytes_nofollow(root, f"{folder}/failure.json",
                             (json.dumps(d, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    except OSError as exc:
        if not is_full_disk(exc) or not failure_reserve.fill(output_dir, {**d, "disk_full": _disk_full_words(exc)}):
            raise
        return  # no room for `failure` either: failure.json says it all
    failure_reserve.release(output_dir)
    _write_reason(root, folder, failure_text(d))


def _disk_full_words(exc: OSError) -> str:
    return f"failure.json could not be written: [Errno {exc.errno}] {exc.strerror}"


def _write_reason(root: Path, folder: str, text: str) -> None:
    """`failure`, unless something is at its name already (the script's own reason; a link the job planted is not
    followed). A full disk leaves no half-written reason: failure.json holds the same."""
    parent = open_dir_nofollow(root, folder)
    try:
        try:
            fd = os.open("failure", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=parent)
        except FileExistsError:
            return
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data):]
        except OSError as exc:
            if not is_full_disk(exc):
                raise
            os.unlink("failure", dir_fd=parent)
        finally:
            os.close(fd)
    finally:
        os.close(parent)
