import subprocess
import sys

from smdist_launcher.container.process_tree import descendants, is_alive

# A child that ignores SIGTERM and starts a grandchild in a new session (what torchrun does with its ranks).
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
print(g.pid, flush=True)
time.sleep(300)
"""


def test_terminate_descendants_reaches_new_sessions_and_stubborn_processes():
    runner = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys
from smdist_launcher.container.process_tree import terminate_descendants
p = subprocess.Popen([sys.executable, "-c", {STUBBORN!r}], stdout=subprocess.PIPE, text=True)
grandchild = int(p.stdout.readline())
print(p.pid, grandchild, flush=True)
killed = terminate_descendants(grace_s=0.5)
print(sorted(killed), flush=True)
"""], stdout=subprocess.PIPE, text=True)
    child, grandchild = map(int, runner.stdout.readline().split())
    killed = runner.stdout.readline().strip()
    runner.wait()
    assert str(child) in killed  # ignored SIGTERM: needed SIGKILL
    assert not is_alive(child) and not is_alive(grandchild)


def test_descendants_of_leaf_is_empty():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert descendants(p.pid) == []
    finally:
        p.kill()
        p.wait()
