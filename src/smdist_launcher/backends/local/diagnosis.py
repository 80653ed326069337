"""One diagnosis per failed job: the FIRST failing host/rank and its traceback, not a victim.

Each host's runtime writes output/failure.json (container/README.md): host, rank, exit_code,
signal, time (ns), traceback, likely_victim. Ranks that died because a peer died (connection
reset, ...) are victims; hosts we stopped ourselves report SIGTERM. Both rank after a real cause."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .logs import tail
from .supervisor import HostExit

TRACEBACK_LINES = 30


def read_failures(failure_files: dict[str, Path]) -> list[dict[str, Any]]:
    found = []
    for host, path in failure_files.items():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data.setdefault("host", host)
            data.setdefault("reported_by", host)
            found.append(data)
    return found


def first_failure(failures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Earliest real cause: non-victims before victims, failures before our own SIGTERMs, then time."""
    def key(f: dict[str, Any]) -> tuple[bool, bool, float]:
        stopped_by_us = f.get("signal") in ("SIGTERM", "SIGINT") and not f.get("traceback")
        return (bool(f.get("likely_victim")), stopped_by_us, float(f.get("time") or float("inf")))

    return min(failures, key=key) if failures else None


def _who(host: str, rank: Any) -> str:
    return f"host {host}" + (f", rank {rank}" if rank is not None else "")


def describe_failure(failure_files: dict[str, Path], log_files: dict[str, Path],
                     first_exit: HostExit | None) -> tuple[str, str]:
    """(one-line failure reason, full diagnosis text)."""
    first = first_failure(read_failures(failure_files))
    if first is not None:
        host, rank = str(first.get("host")), first.get("rank")
        code = first.get("exit_code")
        sig = f" ({first['signal']})" if first.get("signal") else ""
        reason = f"{_who(host, rank)} failed first with exit code {code}{sig}"
        lines = list(first.get("traceback") or [])[-TRACEBACK_LINES:]
        log = log_files.get(host) or log_files.get(str(first.get("reported_by")))
    elif first_exit is not None:
        host = first_exit.host
        reason = f"host {host} failed first with exit code {first_exit.code} (no failure.json: the runtime itself failed)"
        log = log_files.get(host)
        lines = tail(log, TRACEBACK_LINES) if log else []
    else:
        return "failed", "no host reported a failure"
    body = "\n".join("  " + line for line in lines) if lines else "  (no traceback captured)"
    where = f"\nfull log: {log}" if log else ""
    return reason, f"{reason}:\n{body}{where}"


def describe_stop(reason: str, log_files: dict[str, Path], lines: int = 5) -> str:
    """MaxRuntimeExceeded / Stopped: what each host was doing last."""
    parts = [f"{reason}; every host was stopped. Last lines per host:"]
    for host, path in log_files.items():
        parts.extend(f"  {line}" for line in tail(path, lines))
    return "\n".join(parts)
