"""A job's metrics while it runs: every rank line through the MetricParser into the store, the hosts' system samples
into the same store, and the status line's progress (the first metric's latest value, the step rate).

The launcher of the local backends and each Slurm node own one; they feed it the lines their LogMux already splits
by host and rank. Stdlib only here: psutil comes with `start_sampling`."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .definitions import MetricParser
from .store import MetricPoint, MetricWriter
from .system import DEFAULT_INTERVAL_S, SampledHost, SystemSampler

STATUS_EVERY_S = 1.0  # the status line is redrawn at most this often because of metrics


class MetricsRecorder:
    def __init__(self, store: Path, definitions: Iterable[Any] = (), *, step_patterns: Iterable[str] = (),
                 on_progress: Callable[[], None] | None = None,
                 on_note: Callable[[str], None] | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S) -> None:
        def disabled(name: str, why: str) -> None:
            if on_note is not None:
                on_note(f"metric {name!r} disabled for this job: {why}")

        self.parser = MetricParser(definitions, on_disabled=disabled)
        self._first_name = self.parser.names[0] if self.parser else None  # the status line's metric
        self._parse = self.parser.parse if self.parser else None  # None: no definitions, no per-line work
        self.writer = MetricWriter(store)
        # only patterns that capture one group give a step (as the hang detector reads them)
        self._steps = [r for r in (re.compile(p) for p in step_patterns) if r.groups == 1]
        self.on_progress = on_progress
        self.interval_s = interval_s
        self._rank_step: dict[tuple[str, int | None], int] = {}
        self._latest: tuple[float, str, int | None] | None = None  # the first metric: value, host, rank
        self._first_step: tuple[float, int] | None = None
        self._last_step: tuple[float, int] | None = None
        self._notified = 0.0
        self._lock = threading.Lock()
        self._sampler: SystemSampler | None = None

    # ---- training metrics from the ranks' lines ------------------------------------------------
    def line(self, host: str, rank: int | None, text: str) -> None:
        """One line of a rank (or of the host's runtime when rank is None), its prefix removed."""
        step = self._step_of(host, rank, text) if self._steps else None
        found = self._parse(text) if self._parse is not None else None
        if not found:
            if step is not None:
                self._maybe_notify(time.time())
            return
        now = time.time()
        self.writer.write_many([MetricPoint(name, value, now, host, rank, step) for name, value in found])
        for name, value in found:
            if name == self._first_name:
                self._latest = (value, host, rank)
        self._maybe_notify(now)

    def _step_of(self, host: str, rank: int | None, text: str) -> int | None:
        """The step this line gives the rank (its last one when the line gives none); a new step is timed."""
        for regex in self._steps:
            m = regex.search(text)
            if m is None:
                continue
            try:
                step = int(m.group(1))
            except (TypeError, ValueError):
                continue
            now = time.time()
            with self._lock:
                self._rank_step[(host, rank)] = step
                if self._first_step is None:
                    self._first_step = (now, step)
                if self._last_step is None or step > self._last_step[1]:
                    self._last_step = (now, step)
            return step
        return self._rank_step.get((host, rank))

    def _maybe_notify(self, now: float) -> None:
        if self.on_progress is None or now - self._notified < STATUS_EVERY_S:
            return
        self._notified = now
        self.on_progress()

    def progress(self) -> str:
        """For the status line: `train:loss 0.412 (algo-1 r0), step 120, 3.1 steps/s`, or ''."""
        parts = []
        if self._latest is not None:
            value, host, rank = self._latest
            where = f"{host} r{rank}" if rank is not None else host
            parts.append(f"{self._first_name} {value:.4g} ({where})")
        first, last = self._first_step, self._last_step
        if last is not None:
            parts.append(f"step {last[1]}")
            if first is not None and last[0] > first[0] and last[1] > first[1]:
                parts.append(f"{(last[1] - first[1]) / (last[0] - first[0]):.3g} steps/s")
        return ", ".join(parts)

    # ---- system metrics ------------------------------------------------------------------------
    def start_sampling(self, hosts: list[SampledHost]) -> None:
        """Sample each host's process tree (and GPUs) every interval until close(); a no-op without psutil or with
        an interval of 0."""
        self.stop_sampling()
        if self.interval_s <= 0:
            return
        try:
            self._sampler = SystemSampler(hosts, self.writer.write_many, interval_s=self.interval_s)
        except ImportError:
            return
        self._sampler.start()

    def stop_sampling(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None

    def close(self) -> None:
        self.stop_sampling()
        self.writer.close()
