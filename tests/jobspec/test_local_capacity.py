"""The local bound follows this machine's real limits: here, a lowered `ulimit -u` in a child process."""
from __future__ import annotations

import json
import resource
import subprocess
import sys

from smdist_launcher.jobspec.local_capacity import MEMORY_PER_PROCESS, PROCESSES_PER_CORE, capacity


def test_capacity_is_the_tightest_of_cores_memory_and_process_slots():
    import os

    room = capacity()
    assert 1 <= room.processes <= (os.cpu_count() or 1) * PROCESSES_PER_CORE
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert room.processes <= memory // MEMORY_PER_PROCESS


def test_a_lower_process_limit_lowers_the_bound_and_is_named():
    def limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        resource.setrlimit(resource.RLIMIT_NPROC, (20, hard))

    code = ("import json; from smdist_launcher.jobspec.local_capacity import capacity; c = capacity(); "
            "print(json.dumps([c.processes, c.why]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, preexec_fn=limit)
    processes, why = json.loads(out.stdout)
    assert processes == 10 and "20 process slots" in why
