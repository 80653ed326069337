"""`python -m smdist_launcher.container.mpirun_parent MPIRUN ARGS...`: the host's mpirun under a one-thread parent.

The runtime starts this with SIGKILL as its parent-death signal; it starts mpirun with SIGTERM as mpirun's and ends
with mpirun's exit status. Why not mpirun straight under the runtime: the runtime has several threads, and Linux
sends a child's parent-death signal again each time the child is handed to another dying thread, so a SIGKILLed
runtime can give mpirun two SIGTERMs. Open MPI's mpirun takes a second one within 5 s for "stuck" and exits at once,
without stopping the ranks it started itself (the master host's own: no orted there), which then live on under
PID 1. This process has one thread: when it dies with the runtime, mpirun gets exactly one SIGTERM."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from .process_tree import with_parent


def command(argv: list[str]) -> list[str]:
    """argv run under this module (start it with preexec_fn=process_tree.KILL_WITH_PARENT)."""
    return [sys.executable, "-m", __name__, *argv]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m smdist_launcher.container.mpirun_parent MPIRUN ARGS...", file=sys.stderr)
        return 2
    me = os.getpid()
    term_with_me = with_parent(signal.SIGTERM)

    def preexec() -> None:
        if term_with_me is not None:
            term_with_me()
        if os.getppid() != me:  # this process died before the prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # stopped like any process, quietly (no KeyboardInterrupt)
    try:
        proc = subprocess.Popen(argv, preexec_fn=preexec)
    except OSError as e:
        print(f"smdist: cannot run {argv[0]}: {e}", file=sys.stderr, flush=True)
        return 127
    code = proc.wait()
    if code < 0:  # the same wait status for the runtime: killed by that signal
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: no handler to reset
            pass
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
