"""One diagnosis per failed job: the FIRST failing host/rank and its traceback, not a victim.

Each host's runtime writes output/failure.json (container/README.md): host, rank, exit_code,
signal, time (ns), traceback, likely_victim. Ranks that died because a peer died (connection
reset, ...) are victims; hosts we stopped ourselves report SIGTERM. Both rank after a real cause."""
from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

from ...container.failure import OUTSIDE_SIGNALS, exception_of, is_timeout, signal_name
from ...container.full_disk import full_disk_line
from ...contract.no_follow import read_host_file
from .faults import KilledHost
from .log_mux import tail
from .restart_policy import Cause
from .supervisor import HostExit

TRACEBACK_LINES = 30


def read_failures(failure_files: dict[str, Path]) -> list[dict[str, Any]]:
    found = []
    for host, path in failure_files.items():
        try:
            data = json.loads(read_host_file(path))  # a link the job planted is refused, not followed
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data.setdefault("host", host)
            data.setdefault("reported_by", host)
            found.append(data)
    return found


def failure_cause(failure_files: dict[str, Path], first_exit: HostExit | None,
                  killed: KilledHost | None = None, log_files: dict[str, Path] | None = None) -> Cause:
    """What a failed attempt's records say happened, as far as a retry is concerned (restart_policy.Cause).
    `killed`: the host the fault rehearsal killed in this attempt, if any; `log_files`: the hosts' logs, where a host
    that left no failure.json may have said why."""
    failures = read_failures(failure_files)
    if killed is not None and _killed_first(killed, failures):
        return Cause.HOST_LOST  # we killed it ourselves: whatever its placement's exit code or runtime says
    first = first_failure(failures)
    if first_exit is not None and _died_without_a_word(first_exit, failure_files, first):
        if _full_disk_in_log(first_exit, log_files) is not None:
            return Cause.DISK_FULL  # it ended by itself on a full disk: no room for its failure.json, nothing lost
        return Cause.HOST_LOST  # its runtime was killed outright: the machine (container, namespace) is gone
    if first is None:
        return Cause.SCRIPT_ERROR
    if first.get("cause") == "hang":  # a host's own log monitoring (container/hang_watch.py)
        return Cause.HANG
    if _full_disk_of(first) is not None:
        return Cause.DISK_FULL  # the same disk on the next attempt (its trees are kept): a client error
    if is_timeout([str(line) for line in first.get("traceback") or []]):  # by the exception's class
        return Cause.TIMEOUT
    if _signal_of(first) in OUTSIDE_SIGNALS:
        return Cause.KILLED  # stopped or killed from outside (the OOM killer, a lost node): a retry may cure it
    # A crash (SIGSEGV, SIGABRT, SIGBUS, SIGFPE: the same on every attempt) or the script's own error
    return Cause.SCRIPT_ERROR


def _signal_of(failure: dict[str, Any]) -> str | None:
    """The signal that ended the failing rank, from failure.json's signal or a negative exit code."""
    if failure.get("signal"):
        return str(failure["signal"])
    code = failure.get("exit_code")
    return signal_name(-code) if isinstance(code, int) and code < 0 else None


def first_failure(failures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Earliest real cause: non-victims before victims, failures before our own SIGTERMs, then time."""
    def key(f: dict[str, Any]) -> tuple[bool, bool, float]:
        return (bool(f.get("likely_victim")), _stopped_by_us(f), float(f.get("time") or float("inf")))

    return min(failures, key=key) if failures else None


def is_secondary(failure: dict[str, Any]) -> bool:
    """A victim of a peer, or a host we stopped ourselves: never the cause when a real one is known."""
    return bool(failure.get("likely_victim")) or _stopped_by_us(failure)


def _stopped_by_us(failure: dict[str, Any]) -> bool:
    return failure.get("signal") in ("SIGTERM", "SIGINT") and not failure.get("traceback")


def _killed_first(killed: KilledHost, failures: list[dict[str, Any]]) -> bool:
    """The injected kill is the cause unless a real failure (not a victim's, not one we stopped) was reported before
    it. What the killed host wrote after the kill is no explanation: a container can outlive its docker client and
    report itself as a victim, with exit code 1."""
    before = killed.wall_time * 1e9
    return not any(not is_secondary(f) and float(f.get("time") or float("inf")) < before for f in failures)


def _died_without_a_word(first_exit: HostExit, failure_files: dict[str, Path],
                         best: dict[str, Any] | None) -> bool:
    path = failure_files.get(first_exit.host)
    if path is not None and path.exists():
        return False  # it explained itself: trust its failure.json
    if best is None or is_secondary(best):
        return True
    # A real failure elsewhere that happened before this host died still wins.
    return float(best.get("time") or float("inf")) >= first_exit.wall_time * 1e9


# The line the attempt loop writes into every host's log when an attempt after the first starts (the logs append).
_ATTEMPT_MARK = re.compile(r"\[smdist\] ---- attempt \d+ ----")
FULL_DISK_LINES = 60  # of a host's log, read for a full disk: the script's error and the runtime's own, after it


def _full_disk_in_log(first_exit: HostExit, log_files: dict[str, Path] | None) -> str | None:
    """The line of this attempt's end of the host's log that says a write found the disk full, when the host's runtime
    exited by itself (an exit code, not a signal: a runtime killed outright is a lost host, whatever it printed before
    it was killed). None otherwise."""
    log = (log_files or {}).get(first_exit.host)
    if log is None or not 0 < first_exit.code < 128:
        return None
    lines = tail(log, FULL_DISK_LINES)
    marks = [i for i, line in enumerate(lines) if _ATTEMPT_MARK.search(line)]
    return full_disk_line(lines[marks[-1] + 1:] if marks else lines)


def _full_disk_of(failure: dict[str, Any]) -> str | None:
    """What in a host's failure record says its disk was full: the exception its traceback ends with, else the
    runtime's own word that failure.json had to go over its reserve (container/failure_reserve.py). A word elsewhere in
    the traceback (a warning, a line of source) is no such evidence."""
    found = exception_of([str(line) for line in failure.get("traceback") or []])
    line = full_disk_line([f"{found[0]}: {found[1]}"]) if found is not None else None
    if line is None and failure.get("disk_full"):
        line = full_disk_line([str(failure["disk_full"])]) or str(failure["disk_full"])
    return line


def _exit_words(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{code} ({name}): its runtime was killed before it could write failure.json"
    return f"{code} (no failure.json: the runtime itself failed)"


def _who(host: str, rank: Any) -> str:
    return f"host {host}" + (f", rank {rank}" if rank is not None else "")


def describe_failure(failure_files: dict[str, Path], log_files: dict[str, Path],
                     first_exit: HostExit | None, killed: KilledHost | None = None) -> tuple[str, str]:
    """(one-line failure reason, full diagnosis text); `killed` as for failure_cause."""
    failures = read_failures(failure_files)
    first = first_failure(failures)
    if killed is not None and _killed_first(killed, failures):
        host = killed.host
        exited = f" (it exited with code {first_exit.code})" if first_exit and first_exit.host == host else ""
        reason = f"host {host} was lost: killed by the injected fault {killed.fault}{exited}"
        log = log_files.get(host)
        lines = tail(log, TRACEBACK_LINES) if log else []
        first = None  # its own failure.json (if it wrote one after the kill) explains nothing
    elif first_exit is not None and _died_without_a_word(first_exit, failure_files, first):
        # A runtime killed outright (kill -9, the OOM killer) writes no failure.json; the hosts we stopped
        # because of it do, as victims. The supervisor saw it exit first: it is the cause.
        host = first_exit.host
        full = _full_disk_in_log(first_exit, log_files)
        if full is not None:  # it ended by itself, its disk full: no room for failure.json, its log says why
            reason = f"host {host} failed first with exit code {first_exit.code}: its disk is full ({full})"
        else:
            reason = f"host {host} failed first with exit code {_exit_words(first_exit.code)}"
        log = log_files.get(host)
        lines = tail(log, TRACEBACK_LINES) if log else []
    elif first is not None:
        host, rank = str(first.get("host")), first.get("rank")
        code = first.get("exit_code")
        sig = f" ({first['signal']})" if first.get("signal") else ""
        reason = f"{_who(host, rank)} failed first with exit code {code}{sig}"
        if first.get("cause") == "hang" and first.get("traceback"):
            reason = f"{first['traceback'][0]} on {host}"
        elif (full := _full_disk_of(first)) is not None:
            reason = f"{reason}: its disk is full ({full})"
        lines = list(first.get("traceback") or [])[-TRACEBACK_LINES:]
        log = log_files.get(host) or log_files.get(str(first.get("reported_by")))
    else:
        return "failed", "no host reported a failure"
    body = "\n".join("  " + line for line in lines) if lines else "  (no traceback captured)"
    hint = f"\nhint: {first['hint']}" if first is not None and first.get("hint") else ""
    where = f"\nfull log: {log}" if log else ""
    return reason, f"{reason}:\n{body}{hint}{where}"


STOP_REASON_RANKS = 4
STACK_LINES = 12


def stop_reason(reason: str, stacks: list[Any]) -> str:
    """The one-line reason of a stopped job, naming the ranks that were still running (stack_dumps.RankStack)."""
    if not stacks:
        return reason
    named = "; ".join(st.describe() for st in stacks[:STOP_REASON_RANKS])
    more = f" and {len(stacks) - STOP_REASON_RANKS} more" if len(stacks) > STOP_REASON_RANKS else ""
    return f"{reason}; still running: {named}{more}"


def describe_stop(reason: str, log_files: dict[str, Path], stacks: list[Any] | None = None, lines: int = 5) -> str:
    """MaxRuntimeExceeded / Stopped: which ranks were still running and where each was stuck (their stack
    dumps, also in the hosts' logs), then what each host printed last."""
    parts = [f"{reason}; every host was stopped."]
    if stacks:
        parts.append("Ranks still running when stopped, and where each was stuck (innermost call first):")
        for st in stacks:
            parts.append(f"  {st.describe()}")
            parts.extend(f"      {line.strip()}" for line in st.dump[:STACK_LINES])
    parts.append("Last lines per host:")
    for path in log_files.values():  # each line carries its host's prefix already
        parts.extend(f"  {line}" for line in tail(path, lines))
    return "\n".join(parts)


def _ranks_text(ranks: list[int]) -> str:
    """"rank 2", "ranks 0, 1, 3", "ranks 0-5, 7" (runs of consecutive ranks shortened)."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [str(run[0]) if len(run) == 1 else (f"{run[0]}, {run[1]}" if len(run) == 2 else f"{run[0]}-{run[-1]}")
             for run in runs]
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def early_exits(stacks_dirs: dict[str, Path], rank_hosts: dict[int, str], before_ns: int | None = None) -> list[str]:
    """Ranks that exited 0 while others of the job still ran, before `before_ns` (when the job began to fail or be
    stopped): the usual cause of the others hanging in a collective, and invisible otherwise (exit 0 is no failure).

    Each rank registered <pid>.txt in its stacks folder at start-up (compat sitecustomize) and, through the local
    job's preloaded library, writes <pid>.exit ({"pid", "code", "time_ns"}) when it exits."""
    registered: dict[int, tuple[str, int]] = {}   # pid -> (host, rank)
    exits: dict[int, tuple[int, int]] = {}        # pid -> (code, time_ns)
    for host, folder in stacks_dirs.items():
        for path in folder.glob("*.txt") if folder.is_dir() else ():
            if not path.stem.isdigit():
                continue
            try:
                header = json.loads(read_host_file(path).decode("utf-8", "replace").partition("\n")[0])
                rank = int(header["rank"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            pid = int(path.stem)
            registered[pid] = (rank_hosts.get(rank, host), rank)
            try:
                note = json.loads(read_host_file(path.with_suffix(".exit")))
                exits[pid] = (int(note["code"]), int(note["time_ns"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass  # still running when stopped, or killed (no exit() ran)
    found = []
    for pid, (code, when) in sorted(exits.items(), key=lambda item: item[1][1]):
        if code != 0 or (before_ns is not None and when >= before_ns):
            continue
        host, rank = registered[pid]
        running = sorted({r for p, (_, r) in registered.items()
                          if r != rank and (p not in exits or exits[p][1] > when)})
        if running:
            clock = time.strftime("%H:%M:%S", time.localtime(when / 1e9)) + f".{when // 1_000_000 % 1000:03d}"
            found.append(f"rank {rank} ({host}) exited 0 at {clock} while {_ranks_text(running)} "
                         f"{'was' if len(running) == 1 else 'were'} still running")
    return found
