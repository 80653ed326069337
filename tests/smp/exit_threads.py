"""For the workers: report, at exit, the gloo worker threads that outlived smp's teardown.

A gloo worker thread alive while Python finalizes can abort the rank ("terminate called without an
active exception"); smp.teardown joins them at exit. Registered before smp builds its first mesh, this
handler runs after smp's own (atexit runs handlers last-in, first-out).
"""
from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

GLOO_WORKER = "pt_gloo_runloop"  # the name torch gives ProcessGroupGloo's worker threads


def thread_names() -> list[str]:
    return [(task / "comm").read_text().strip() for task in Path("/proc/self/task").iterdir()]


def report_at_exit() -> None:
    def report() -> None:
        if os.environ.get("RANK", "0") == "0":
            row = {"check": "exit_threads", "gloo_workers": thread_names().count(GLOO_WORKER)}
            print("RESULT " + json.dumps(row), flush=True)

    atexit.register(report)
