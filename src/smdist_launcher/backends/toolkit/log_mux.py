"""Interleave the hosts' output: each line saved to logs/<host>.log and shown on the console.

The runtime already prefixes rank lines `[algo-2 r3] ` and its own `[algo-2] `; a line
without a prefix (something printed before the runtime set up) gets its host's. A line goes
to the log of the host its prefix names: mpirun relays every host's ranks through the master's
output, yet `smdist logs --host algo-2` should show algo-2's ranks.

A consumer that raises (a full disk under the log files, a console, a progress watcher) never stops the reader that
calls on_line: the host would block on a full pipe and the job hang until max_run. The line goes on to the other
consumers, the error is kept in `errors` (and `on_error` told once per consumer): the job's loop fails the job
with it."""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ...contract.no_follow import read_host_tail
from .job_console import JobConsole

_PREFIX = re.compile(r"^\[(?P<host>[^\] ]+)(?: r(?P<rank>\d+))?\](?: |$)")


class LogMux:
    def __init__(self, log_files: dict[str, Path], console: JobConsole,
                 on_new_rank: Callable[[int], None] | None = None,
                 on_rank_line: Callable[[str, int | None, str], None] | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.console = console
        self.on_new_rank = on_new_rank
        self.on_rank_line = on_rank_line  # (host, rank or None, the line without its prefix): progress watchers
        self.on_error = on_error  # (the failure, one line): once per consumer that failed
        self._files: dict[str, IO[bytes]] = {h: open(p, "ab") for h, p in log_files.items()}  # noqa: SIM115
        self._lock = threading.Lock()
        self.ranks_seen: set[int] = set()
        self.lines = 0
        # what failed in a consumer, one line each (the first failure of each consumer): the job fails with it
        self.errors: list[str] = []
        self._failed: set[str] = set()

    @property
    def failure(self) -> str | None:
        """The first consumer failure, as the job's failure reason says it; None while every consumer works."""
        return self.errors[0] if self.errors else None

    def on_line(self, host: str, raw: bytes) -> None:
        """One line of a host's output, to its log file, the console and the watchers. Never raises."""
        try:
            self._on_line(host, raw)
        except Exception as exc:  # noqa: BLE001 - the reader must drain on whatever happens here
            self._consumer_failed("the log multiplexer", exc)

    def _on_line(self, host: str, raw: bytes) -> None:
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
        failed: tuple[str, BaseException] | None = None
        with self._lock:
            self.lines += 1
            if match is not None and match["rank"] is not None and int(match["rank"]) not in self.ranks_seen:
                new_rank = int(match["rank"])
                self.ranks_seen.add(new_rank)
            out = self._files.get(host)
            if out is not None:
                try:
                    out.write(raw)
                    out.flush()
                except (OSError, ValueError) as exc:  # ENOSPC, a closed file: the screen and the watchers go on
                    failed = (f"writing logs/{host}.log", exc)
        if failed is not None:
            self._consumer_failed(*failed)
        self._call("the console", self.console.line, host, text)
        if new_rank is not None and self.on_new_rank is not None:
            self._call("the rank watcher", self.on_new_rank, new_rank)
        if self.on_rank_line is not None:
            rank = int(match["rank"]) if match is not None and match["rank"] is not None else None
            self._call("the progress watcher", self.on_rank_line, host, rank,
                       text[match.end():] if match is not None else text)

    def _call(self, what: str, consumer: Callable[..., None], *args: Any) -> None:
        try:
            consumer(*args)
        except Exception as exc:  # noqa: BLE001 - one consumer's failure never stops the others nor the reader
            self._consumer_failed(what, exc)

    def _consumer_failed(self, what: str, exc: BaseException) -> None:
        with self._lock:
            if what in self._failed:
                return
            self._failed.add(what)
            message = f"{what} failed: {type(exc).__name__}: {exc}"
            self.errors.append(message)
        if self.on_error is not None:
            try:
                self.on_error(message)
            except Exception:  # noqa: BLE001 - the error is kept in `errors` for the job's loop anyway
                pass

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                try:
                    f.close()
                except OSError:  # the last flush on a full disk: its error is in `errors` already
                    pass
            self._files.clear()


def split_prefix(text: str) -> tuple[str | None, int | None, str]:
    """(host, rank, the line without its prefix) of a logged line; (None, None, text) without a prefix."""
    match = _PREFIX.match(text)
    if match is None:
        return None, None, text
    return match["host"], int(match["rank"]) if match["rank"] is not None else None, text[match.end():]


TAIL_BYTES = 1 << 20  # what tail() reads from a log's end, whatever its size (a job may print gigabytes)


def tail(path: Path, lines: int = 20) -> list[str]:
    """The last lines of a log file, from its last TAIL_BYTES (a link is refused, not followed)."""
    try:
        data = read_host_tail(path, TAIL_BYTES)
    except OSError:
        return []
    found = data.decode("utf-8", "replace").splitlines()
    if len(data) == TAIL_BYTES:
        found = found[1:]  # the first one may be cut
    return found[-lines:]
