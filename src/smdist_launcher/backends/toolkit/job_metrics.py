"""A job's metrics on the backends that run hosts from a job folder: what the recorder is told (the metric
definitions and step patterns, carried in the job folder for Slurm nodes, so the sbatch script stays the same) and
which processes and GPUs each host's system metrics come from."""
from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...metrics.recorder import MetricsRecorder
from ...metrics.store import STORE_FILE, host_store_file
from ...metrics.system import DEFAULT_INTERVAL_S, SampledHost

SETTINGS_FILE = "metrics-settings.json"   # in the job folder: what each Slurm node's recorder is told
INTERVAL_ENV = "SMDIST_METRICS_INTERVAL_S"  # seconds between system samples (default 5; 0: no sampling)


@dataclass(frozen=True)
class MetricsSettings:
    definitions: list[dict[str, str]] = field(default_factory=list)
    step_patterns: list[str] = field(default_factory=list)

    def save(self, job_root: Path) -> None:
        (job_root / SETTINGS_FILE).write_text(json.dumps({"metric_definitions": self.definitions,
                                                          "step_patterns": self.step_patterns}, indent=2) + "\n")

    @classmethod
    def load(cls, job_root: Path) -> MetricsSettings:
        try:
            data = json.loads((job_root / SETTINGS_FILE).read_text())
        except (OSError, ValueError):
            return cls()
        return cls(list(data.get("metric_definitions") or []), list(data.get("step_patterns") or []))


def sample_interval(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between system samples: $SMDIST_METRICS_INTERVAL_S (0 turns sampling off), else 5."""
    value = (os.environ if environ is None else environ).get(INTERVAL_ENV, "")
    try:
        seconds = float(value) if value else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S
    return 0.0 if seconds <= 0 else max(0.1, seconds)


def job_recorder(job_root: Path, settings: MetricsSettings, *, host: str | None = None,
                 on_progress: Callable[[], None] | None = None,
                 on_note: Callable[[str], None] | None = None) -> MetricsRecorder:
    """The recorder of a job (host None: the launcher records every host into metrics.jsonl) or of one host writing
    from its own machine (a Slurm node: metrics.<host>.jsonl)."""
    store = job_root / (STORE_FILE if host is None else host_store_file(host))
    return MetricsRecorder(store, settings.definitions, step_patterns=settings.step_patterns,
                           on_progress=on_progress, on_note=on_note, interval_s=sample_interval())


def sampled_hosts(pids: Mapping[str, int], roots: Mapping[str, Path], gpus: Mapping[str, list[str]], *,
                  locate: Callable[[str], int | None] | None = None) -> list[SampledHost]:
    """Each host's root process, /opt/ml and GPUs (GPU ids that are not NVML indices, e.g. UUIDs, are left out).
    locate(host): the placement's own way to the host's root when the process started is not it (docker)."""
    return [SampledHost(h, pid, disk_path=str(roots[h]) if h in roots else None,
                        gpus=[int(g) for g in gpus.get(h, []) if str(g).isdigit()],
                        locate=functools.partial(locate, h) if locate is not None else None)
            for h, pid in pids.items()]
