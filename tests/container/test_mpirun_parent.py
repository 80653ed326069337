"""mpirun's one-thread parent: same exit status as the command, and ONE SIGTERM when a multithreaded runtime dies."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from smdist_launcher.container import mpirun_parent
from smdist_launcher.container.process_tree import TERM_WITH_PARENT

pytestmark = pytest.mark.skipif(TERM_WITH_PARENT is None, reason="needs Linux prctl(PR_SET_PDEATHSIG)")


@pytest.mark.parametrize("script, code", [("exit 0", 0), ("exit 3", 3), ("kill -TERM $$", -signal.SIGTERM)])
def test_exit_status_is_the_commands(script, code):
    assert subprocess.run(mpirun_parent.command(["sh", "-c", script])).returncode == code


def test_a_command_that_cannot_start_is_reported():
    proc = subprocess.run(mpirun_parent.command(["/nonexistent/mpirun"]), capture_output=True, text=True)
    assert proc.returncode == 127 and "cannot run /nonexistent/mpirun" in proc.stderr


# Counts the SIGTERMs it gets (Open MPI's mpirun exits at once on a second one, leaving its local ranks behind).
COUNTER = """
import os, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
print("ready", flush=True)
deadline = time.monotonic() + 60  # bounded: a counter that is never signalled still ends
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
open(sys.argv[1] + ".first", "w").close()
while not os.path.exists(sys.argv[1] + ".killed") and time.monotonic() < deadline:  # the test kills our parent now
    time.sleep(0.01)
time.sleep(1.0)  # let a further parent-death signal arrive
open(sys.argv[1], "w").write(str(len(got)))
"""

# A runtime-like parent with several threads. The command is started by a thread that ends first: its parent-death
# signal fires when the thread that forked it ends and again when the process dies (Linux hands the child to the
# next thread), which is what happens, in a burst, when a multithreaded runtime is SIGKILLed.
PARENT = """
import subprocess, sys, threading, time
from smdist_launcher.container import mpirun_parent
from smdist_launcher.container.process_tree import TERM_WITH_PARENT
for _ in range(4):
    threading.Thread(target=time.sleep, args=(300,), daemon=True).start()
def start():
    argv = [sys.executable, "-c", sys.argv[1], sys.argv[2]]
    proc = subprocess.Popen(mpirun_parent.command(argv), preexec_fn=TERM_WITH_PARENT, start_new_session=True,
                            stdout=subprocess.PIPE)
    sys.stdout.write(proc.stdout.readline().decode())
starter = threading.Thread(target=start)
starter.start(); starter.join()
sys.stdout.flush()
time.sleep(300)
"""


def test_the_command_gets_one_sigterm_from_a_multithreaded_parent(tmp_path):
    count = tmp_path / "count"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PARENT), COUNTER, str(count)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"  # the thread that started it has ended
        deadline = time.monotonic() + 90  # bounded waits for the counter's files
        while not Path(f"{count}.first").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        Path(f"{count}.killed").touch()
        while not (count.exists() and count.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert count.read_text() == "1"
    finally:
        if parent.poll() is None:
            parent.kill()
