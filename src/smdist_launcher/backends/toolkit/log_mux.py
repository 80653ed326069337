"""Interleave the hosts' output: each line saved to logs/<host>.log and shown on the console.

The runtime already prefixes rank lines `[algo-2 r3] ` and its own `[algo-2] `; a line
without a prefix (something printed before the runtime set up) gets its host's. A line goes
to the log of the host its prefix names: mpirun relays every host's ranks through the master's
output, yet `smdist logs --host algo-2` should show algo-2's ranks."""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .job_console import JobConsole

_PREFIX = re.compile(r"^\[(?P<host>[^\] ]+)(?: r(?P<rank>\d+))?\](?: |$)")


class LogMux:
    def __init__(self, log_files: dict[str, Path], console: JobConsole,
                 on_new_rank: Callable[[int], None] | None = None,
                 on_rank_line: Callable[[str, int | None, str], None] | None = None) -> None:
        self.console = console
        self.on_new_rank = on_new_rank
        self.on_rank_line = on_rank_line  # (host, rank or None, the line without its prefix): progress watchers
        self._files: dict[str, IO[bytes]] = {h: open(p, "ab") for h, p in log_files.items()}  # noqa: SIM115
        self._lock = threading.Lock()
        self.ranks_seen: set[int] = set()
        self.lines = 0

    def on_line(self, host: str, raw: bytes) -> None:
        if not raw.endswith(b"\n"):
            raw += b"\n"
        text = raw.decode("utf-8", "replace").rstrip("\n")
        match = _PREFIX.match(text)
        if match is None or match["host"] not in self._files:
            text = f"[{host}] {text}"
            raw = text.encode() + b"\n"
        else:
            host = match["host"]
        new_rank = None
        with self._lock:
            self.lines += 1
            if match is not None and match["rank"] is not None and int(match["rank"]) not in self.ranks_seen:
                new_rank = int(match["rank"])
                self.ranks_seen.add(new_rank)
            out = self._files.get(host)
            if out is not None:
                out.write(raw)
                out.flush()
        self.console.line(host, text)
        if new_rank is not None and self.on_new_rank is not None:
            self.on_new_rank(new_rank)
        if self.on_rank_line is not None:
            rank = int(match["rank"]) if match is not None and match["rank"] is not None else None
            self.on_rank_line(host, rank, text[match.end():] if match is not None else text)

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()


def split_prefix(text: str) -> tuple[str | None, int | None, str]:
    """(host, rank, the line without its prefix) of a logged line; (None, None, text) without a prefix."""
    match = _PREFIX.match(text)
    if match is None:
        return None, None, text
    return match["host"], int(match["rank"]) if match["rank"] is not None else None, text[match.end():]


def tail(path: Path, lines: int = 20) -> list[str]:
    """The last lines of a log file (small files: read whole)."""
    try:
        data = path.read_text(errors="replace")
    except OSError:
        return []
    return data.splitlines()[-lines:]
