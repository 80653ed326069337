"""`python -m smdist_launcher.container.mpirun_parent MPIRUN ARGS...`: the host's mpirun under a one-thread parent.

Open MPI's mpirun takes a second SIGTERM (SIGINT, SIGHUP) within 5 s of the first for "stuck" and exits at once,
without stopping the ranks it started itself (the master host's own: no orted there), which then live on under PID 1.
Straight under the runtime, mpirun's parent-death SIGTERM came several times: Linux sends it again each time the
child is handed to another thread of a dying multithreaded parent, or to another subreaper (the runtime is one).

So the runtime starts this process with SIGTERM as its parent-death signal. It passes the FIRST stop signal it gets
on to mpirun, ignores the rest, stays mpirun's parent until mpirun ends (mpirun is never handed on while it runs)
and exits with mpirun's status. mpirun gets SIGTERM as its own parent-death signal only in case this process is
SIGKILLed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType

from .process_tree import with_parent

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def command(argv: list[str]) -> list[str]:
    """argv run under this module (start it with preexec_fn=process_tree.TERM_WITH_PARENT)."""
    return [sys.executable, "-m", __name__, *argv]


class _ForwardOnce:
    """Signal handler: the first stop signal goes to the child (once it exists); later ones are dropped."""

    def __init__(self) -> None:
        self.child: int | None = None
        self.pending: int | None = None
        self.sent = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = signum
        self.deliver()

    def deliver(self) -> None:
        if self.pending is not None and self.child is not None and not self.sent:
            self.sent = True
            try:
                os.kill(self.child, self.pending)
            except ProcessLookupError:
                pass


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m smdist_launcher.container.mpirun_parent MPIRUN ARGS...", file=sys.stderr)
        return 2
    me = os.getpid()
    term_with_me = with_parent(signal.SIGTERM)

    def preexec() -> None:  # exec resets our handlers to the default for mpirun
        if term_with_me is not None:
            term_with_me()
        if os.getppid() != me:  # this process died before the prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    forward = _ForwardOnce()
    for s in STOP_SIGNALS:
        signal.signal(s, forward)
    try:
        proc = subprocess.Popen(argv, preexec_fn=preexec)
    except OSError as e:
        print(f"smdist: cannot run {argv[0]}: {e}", file=sys.stderr, flush=True)
        return 127
    forward.child = proc.pid
    forward.deliver()  # a stop signal that came while mpirun was starting
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
