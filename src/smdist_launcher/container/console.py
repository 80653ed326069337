"""The runtime's stdout: one line per line of output, prefixed `[algo-2 r3] ` (global rank) or `[algo-2] `."""
from __future__ import annotations

import sys
import threading
from typing import TextIO


class Console:
    def __init__(self, host: str, stream: TextIO | None = None, rank_hosts: dict[int, str] | None = None) -> None:
        self.host = host
        # mpirun's output on the master carries every host's ranks: name the rank's own host.
        self.rank_hosts = rank_hosts or {}
        self._stream: TextIO | None = stream or sys.stdout
        self._lock = threading.Lock()

    def line(self, rank: int | None, text: str) -> None:
        prefix = f"[{self.host}]" if rank is None else f"[{self.rank_hosts.get(rank, self.host)} r{rank}]"
        with self._lock:
            if self._stream is None:
                return
            try:
                self._stream.write(f"{prefix} {text.rstrip(chr(13))}\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                # The reader (the local launcher) is gone: keep running so the clean-up still happens.
                self._stream = None

    def say(self, text: str) -> None:
        for part in text.splitlines() or [""]:
            self.line(None, part)
