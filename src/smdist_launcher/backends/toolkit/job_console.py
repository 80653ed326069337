"""Where a job's live output goes: plain lines when piped, coloured lines per host and a
status line (phase, hosts up, ranks up) when a terminal is attached (rich). Everything the job says (its lines, names,
metric names, reasons) is rendered as text, never as rich markup.

The screen gets the user's own output; the launchers' chatter (ConsoleFilter) and, after the first failure, the
other ranks' tracebacks go only to the log files, which keep every line (`smdist logs`)."""
from __future__ import annotations

import re
import sys
import threading
from typing import IO, Any

from ..phases import Phase

_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")

_PREFIX = re.compile(r"^\[(?P<host>[^\] ]+)(?: r(?P<rank>\d+))?\](?: |$)")
_TORCH_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torch prefixes its ranks' tracebacks so
# Lines of the runtime and the launchers (not of a rank) that tell a user nothing on a normal run.
_NOISE = re.compile("|".join((
    r"^code directory .* is not empty",                  # local mode stages the code there itself
    r"^running: ",                                      # the launcher's argv: in the plan and the log
    r"^success$",
    r"^\s*$", r"^\*{5,}$", r"Setting OMP_NUM_THREADS environment variable",   # torchrun's thread banner
    r'could not find environment variable "LD_LIBRARY_PATH"',
    r"^\s*Data for JOB \[", r"^\s*=+\s*JOB MAP\s*=+\s*$", r"^\s*Data for node: ",  # mpirun --display-map
    r"^\s*Process OMPI jobid: ", r"^\s*=+\s*$",
    r"^MPI worker: serving orted", r"^orted exited",
)))
_TRACEBACK = "Traceback (most recent call last):"
_LAUNCHER_SAW_FAILURE = re.compile(r"failed \(exitcode: -?\d+\) local_rank|^failed: ")


class ConsoleFilter:
    """Which host lines reach the screen. Before any failure: every rank line, and the launchers' lines that are
    not known noise. From the first traceback on: only the failing rank's lines (the others' are mostly "peer
    closed the connection" echoes), once with a note saying so; the failure summary follows at the end."""

    def __init__(self) -> None:
        self.failed: tuple[str, int | None] | None = None

    def check(self, text: str) -> tuple[bool, str | None]:
        """(show this line?, a note to print before it)."""
        match = _PREFIX.match(text)
        if match is None:
            return True, None
        host, rank = match["host"], int(match["rank"]) if match["rank"] is not None else None
        body = text[match.end():]
        if self.failed is not None:
            return rank is not None and (host, rank) == self.failed, None
        if rank is not None:
            if _TRACEBACK in _TORCH_RANK_PREFIX.sub("", body, count=1):
                self.failed = (host, rank)
                return True, (f"rank {rank} on {host} failed; the other ranks' output from here on goes to the "
                              "log files only")
            return True, None
        if _LAUNCHER_SAW_FAILURE.search(body):  # a rank died without a traceback (a signal, os._exit)
            self.failed = (host, None)
            return False, f"a rank on {host} failed; the hosts' output from here on goes to the log files only"
        return not _NOISE.search(body), None


class PlainConsole:
    """No colours, no status line: what CI logs and pipes get."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()
        self._filter = ConsoleFilter()

    def line(self, host: str, text: str) -> None:
        with self._lock:
            show, note = self._filter.check(text)
            if note:
                self._write(f"[smdist] {note}")
            if show:
                self._write(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # the terminal or pipe is gone (SIGHUP, ssh dropped): the log files still get every line

    def note(self, text: str) -> None:
        with self._lock:
            self._write(f"[smdist] {text}")

    def status(self, text: str) -> None:
        pass  # phases are in job.json; a non-terminal gets no redraws

    def close(self) -> None:
        pass


class RichConsole:
    """Colour per host and a live status line below the log lines."""

    def __init__(self, hosts: list[str], console: Any = None) -> None:
        from rich.console import Console  # lazy: only terminals pay for rich
        from rich.text import Text

        self._console = console or Console(highlight=False)
        self._styles = {h: _PALETTE[i % len(_PALETTE)] for i, h in enumerate(hosts)}
        self._status: Any = self._console.status(Text(str(Phase.STARTING)), spinner="dots")
        self._status.start()
        self._filter = ConsoleFilter()
        self._lock = threading.Lock()

    def line(self, host: str, text: str) -> None:
        from rich.text import Text

        with self._lock:
            show, note = self._filter.check(text)
        if note:
            self.note(note)
        if show:
            self._print(Text(text, style=self._styles.get(host, "")))

    def note(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(f"[smdist] {text}", style="bold"))

    def _print(self, text: Any) -> None:
        try:
            self._console.print(text, soft_wrap=True)
        except (OSError, ValueError):
            pass  # the terminal is gone (SIGHUP): the log files still get every line

    def status(self, text: str) -> None:
        from rich.text import Text

        try:  # as text: a metric name or a job name such as `loss[/b]` is no markup
            self._status.update(Text(text))
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        try:
            self._status.stop()
        except (OSError, ValueError):
            pass


class SilentConsole:
    """logs=False: lines still go to the per-host log files, nothing to the screen."""

    def line(self, host: str, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


JobConsole = PlainConsole | RichConsole | SilentConsole


def console_for(logs: Any, hosts: list[str]) -> JobConsole:
    """logs: False/None/"None" → silent; anything else streams (SageMaker's "All" too)."""
    if logs is False or logs is None or (isinstance(logs, str) and logs.lower() == "none"):
        return SilentConsole()
    if sys.stdout.isatty():
        return RichConsole(hosts)
    return PlainConsole()
