"""A local job's record and what the console says of it: job.json saved under one lock (the attempt loop, the progress
watcher and the fault injector change it from their threads), phases entered and shown on the status line, the end
told in one line (the full diagnosis travels in JobFailedError)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..phases import Phase
from ..states import JobState
from ..toolkit.job_console import JobConsole
from ..toolkit.records import JobRecord


class RecordKeeper:
    def __init__(self, record: JobRecord, record_file: Path, console: JobConsole, job_name: str) -> None:
        self.record, self.record_file, self.console, self.job_name = record, record_file, console, job_name
        self._lock = threading.Lock()

    def save(self) -> None:
        with self._lock:
            self.record.save(self.record_file)

    def phase(self, name: Phase, detail: str = "") -> None:
        self.record.enter_phase(name)
        self.save()
        self.console.status(f"{self.job_name}: {name}{' — ' + detail if detail else ''}")

    def running(self, detail: str) -> None:
        """The status line while the ranks run (a new rank, a new metric value or step)."""
        if self.record.phase is Phase.RUNNING:
            self.console.status(f"{self.job_name}: running — {detail}")

    def attempts(self, entries: list[dict[str, Any]]) -> None:
        """The attempt book's entries (toolkit/attempt/book.py), saved."""
        self.record.attempts = entries
        self.save()

    def injected(self, what: dict[str, Any]) -> None:
        """A fault fired (saved with the next change)."""
        self.record.backend_info.setdefault("injected", []).append(what)

    def stragglers(self, laggards: dict[str, list[int]]) -> None:
        self.record.backend_info["stragglers"] = laggards
        for monitor, ranks in laggards.items():
            self.console.note(f"stragglers ({monitor}): rank(s) {', '.join(map(str, ranks))} far behind")
        self.save()

    def end(self, status: str | JobState, reason: str | None, model_data: str | None) -> None:
        self.record.finish(status, reason)
        self.save()
        took = self.record.duration or 0.0
        if self.record.status is JobState.COMPLETED:
            where = f"; model: {model_data}" if model_data else ""
            self.console.note(f"job {self.job_name} completed in {took:.1f} s{where}")
        else:
            self.console.note(f"job {self.job_name} {self.record.status} after {took:.1f} s: {reason}")
