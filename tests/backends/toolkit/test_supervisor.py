"""The supervisor with fake hosts (tiny python commands): all end together, nothing survives."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.backends.toolkit.supervisor import HostLaunch, Supervisor

# A host that starts a grandchild in ANOTHER session (like orted started through the rsh agent),
# then idles: only the /proc sweep can find that grandchild. The file `escapee-up` (in its cwd) says it started one.
SPAWNS_ESCAPEE = ("import subprocess, sys, time; "
                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
                  "start_new_session=True); open('escapee-up', 'w').close(); print('up', flush=True); time.sleep(600)")


def _launch(tmp_path: Path, host: str, code: str, job_id: str) -> HostLaunch:
    env = {**os.environ, "SMDIST_JOB_ID": job_id}
    return HostLaunch(host, [sys.executable, "-c", code], env, tmp_path)


def _run(tmp_path: Path, job_id: str, codes: dict[str, str], **kwargs):
    lines: list[tuple[str, bytes]] = []
    sup = Supervisor(job_id, [_launch(tmp_path, h, c, job_id) for h, c in codes.items()],
                     lambda h, line: lines.append((h, line)), grace=10.0, **kwargs)
    sup.start()
    return sup.wait(), lines


def test_all_hosts_succeed(tmp_path):
    outcome, lines = _run(tmp_path, "sup-ok", {"algo-1": "print('one')", "algo-2": "print('two')"})
    assert outcome.status == "Completed" and outcome.exit_codes == {"algo-1": 0, "algo-2": 0}
    assert sorted(lines) == [("algo-1", b"one\n"), ("algo-2", b"two\n")]


def test_one_failing_host_stops_the_others_and_their_escaped_children(tmp_path):
    job_id = f"sup-fail-{os.getpid()}"
    # fails once algo-1 has started its escapee (bounded: a wait that never ends would hang the job)
    fail_after_up = ("import os, time\ndeadline = time.monotonic() + 120\n"
                     "while not os.path.exists('escapee-up') and time.monotonic() < deadline:\n    time.sleep(0.05)\n"
                     "raise SystemExit(3)")
    outcome, _ = _run(tmp_path, job_id, {"algo-1": SPAWNS_ESCAPEE, "algo-2": fail_after_up})
    assert outcome.status == "Failed"
    assert outcome.first_failure is not None and outcome.first_failure.host == "algo-2"
    assert outcome.first_failure.code == 3
    assert outcome.exit_codes["algo-1"] is not None  # stopped, not left running
    assert job_processes(job_id) == []


def test_max_run_stops_everything(tmp_path):
    job_id = f"sup-maxrun-{os.getpid()}"
    outcome, _ = _run(tmp_path, job_id, {"algo-1": SPAWNS_ESCAPEE}, max_run=1)
    assert outcome.status == "MaxRuntimeExceeded" and "max_run of 1 s exceeded" in outcome.reason
    assert job_processes(job_id) == []


def test_a_line_without_end_reaches_the_sink_in_bounded_pieces(tmp_path):
    """A host's output is read by the launcher (root under serve --run-as): a job that writes without a newline
    (`cat /dev/zero`) must not make it hold the whole "line" in memory. Nothing of the output is lost."""
    from smdist_launcher.backends.toolkit.supervisor import MAX_LINE_BYTES

    size = 3 * MAX_LINE_BYTES + 5
    outcome, lines = _run(tmp_path, "sup-long", {"algo-1": f"import sys; sys.stdout.write('x' * {size})"})
    assert outcome.status == "Completed"
    assert max(len(line) for _, line in lines) <= MAX_LINE_BYTES
    assert b"".join(line for _, line in lines) == b"x" * size
