"""Where a job's live output goes: plain lines when piped, coloured lines per host and a
status line (phase, hosts up, ranks up) when a terminal is attached (rich)."""
from __future__ import annotations

import sys
import threading
from typing import IO, Any

_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")


class PlainConsole:
    """No colours, no status line: what CI logs and pipes get."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def line(self, host: str, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # the terminal or pipe is gone (SIGHUP, ssh dropped): the log files still get every line

    def note(self, text: str) -> None:
        self.line("", f"[smdist] {text}")

    def status(self, text: str) -> None:
        pass  # phases are in job.json; a non-terminal gets no redraws

    def close(self) -> None:
        pass


class RichConsole:
    """Colour per host and a live status line below the log lines."""

    def __init__(self, hosts: list[str]) -> None:
        from rich.console import Console  # lazy: only terminals pay for rich

        self._console = Console(highlight=False)
        self._styles = {h: _PALETTE[i % len(_PALETTE)] for i, h in enumerate(hosts)}
        self._status: Any = self._console.status("starting", spinner="dots")
        self._status.start()

    def line(self, host: str, text: str) -> None:
        from rich.text import Text

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
        try:
            self._status.update(text)
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
